"""First Linear layer "frozen" with `l1.requires_grad = False`, an attribute on the module, not on its parameters.

source: https://github.com/f-dangel/backpack/issues/233
kind: bug
symptom: silent
verified: after 3 SGD steps l1.weight moved by 0.0095 (max abs) and l1.weight.grad is not None; 0.0 with l1.requires_grad_(False)
"""
import torch
from torch.nn import CrossEntropyLoss, Flatten, Linear, Sequential

torch.manual_seed(0)
X, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

l1 = Linear(784, 128)
l1.requires_grad = False  # ROOT
l2 = Linear(128, 10)

model = Sequential(Flatten(), l1, l2)
lossfunc = CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for step in range(3):
    optimizer.zero_grad()
    loss = lossfunc(model(X), y)
    loss.backward()
    optimizer.step()

for name, param in model.named_parameters():
    print(name, param.grad is None)
