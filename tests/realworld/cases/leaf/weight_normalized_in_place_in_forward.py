"""A custom layer normalizes its weight in place in forward (self.weight /= ...) the way one writes x += 1 on a plain tensor; the weight is a leaf that requires grad, so the in-place update is refused on the first call.

source: https://discuss.pytorch.org/t/leaf-variable-was-used-in-an-inplace-operation/308
kind: bug
symptom: crash
verified: a leaf Variable that requires grad is being used in an in-place operation
"""
import torch
import torch.nn as nn


class NormedLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x):
        self.weight /= self.weight.norm(dim=1, keepdim=True)  # ROOT
        return x @ self.weight.t()


model = nn.Sequential(NormedLinear(6, 4), nn.ReLU(), nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
