"""A full backward hook registered with model.register_full_backward_hook never runs because the model is called as model.forward(x), which bypasses nn.Module.__call__ and all module hooks; the gradient still reaches some_param, but the hook's record stays empty.

source: https://github.com/pytorch/pytorch/issues/117925
kind: bug
symptom: silent
verified: after 3 backward passes the hook has been called 0 times while model.some_param.grad is 15.0; calling model(x) the hook is called 3 times
"""
import torch
import torch.nn as nn


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.some_param = nn.Parameter(torch.tensor(1.0))

    def forward(self, x):
        return self.some_param * x


seen = []


def full_backward_hook(module, grad_input, grad_output):
    seen.append(grad_output)


model = MyModule()
model.register_full_backward_hook(full_backward_hook)
print("model.some_param.grad:", model.some_param.grad)
for _ in range(3):
    out = model.forward(torch.tensor(5.0))  # ROOT
    out.backward()
print("hook calls:", len(seen), "model.some_param.grad:", model.some_param.grad)
