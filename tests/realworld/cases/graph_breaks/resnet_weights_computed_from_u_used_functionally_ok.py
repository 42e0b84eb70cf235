"""The thread's second way: weights w = sin(u) / ||u|| are computed in forward and passed to F.linear (a LinearOp holding the tensor, no nn.Parameter), so the gradient reaches u.

source: https://discuss.pytorch.org/t/what-is-the-most-convenient-way-to-make-model-weights-dependent-on-some-parameter/47645
kind: lookalike
verified: u.grad is a nonzero tensor and u changes after each optimizer step
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LinearOp:
    def __init__(self, weights, bias=None):
        self.weights = weights
        self.bias = bias

    def __call__(self, X):
        return F.linear(X, self.weights, self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.u = nn.Parameter(torch.randn(8, 8))
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        w = torch.sin(self.u) / torch.norm(self.u)
        return self.fc2(torch.relu(LinearOp(w)(x)))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(3):
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.u.grad.abs().sum())
