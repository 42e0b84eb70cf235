"""The same full backward hook with the model called as model(x), as the thread resolves: nn.Module.__call__ wires the hook into the graph and it runs on every backward.

source: https://github.com/pytorch/pytorch/issues/117925
kind: lookalike
verified: the hook is called 3 times and model.some_param.grad is 15.0
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
    out = model(torch.tensor(5.0))
    out.backward()
print("hook calls:", len(seen), "model.some_param.grad:", model.some_param.grad)
