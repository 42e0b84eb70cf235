"""Module parameters kept in a dict as model.parameters(): the generator is exhausted the first time it is iterated (here to print and count the parameters), so the optimizer built from the same dict entry receives nothing.

source: https://github.com/pytorch/pytorch/issues/110357
kind: bug
symptom: crash
verified: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        param = torch.rand(2, 2)
        self.register_parameter('param', nn.Parameter(param))

    def forward(self, x):
        return x @ self.param


mymodule = MyModule()
mydict = dict(param=mymodule.parameters())  # ROOT

print("Print #3")
n_params = 0
for param in mydict['param']:
    print(param)
    n_params += param.numel()
print(n_params)

optimizer = torch.optim.SGD(mydict['param'], lr=0.1)  # SYMPTOM
for step in range(3):
    loss = mymodule(torch.randn(4, 2)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
