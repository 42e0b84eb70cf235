"""RMSE loss with a small epsilon added to the MSE before the square root, as suggested for the MseLossBackward NaN: a perfect prediction gives a finite (zero) gradient.

source: https://discuss.pytorch.org/t/function-mselossbackward-returned-nan-values-in-its-0th-output/94875
kind: lookalike
verified: x.grad is tensor([[0.]]) for a zero MSE, and the regression below trains with finite gradients
"""
import torch
import torch.nn as nn


class RMSELoss(nn.Module):
    def __init__(self, eps=1e-8):
        super().__init__()
        self.mse = nn.MSELoss()
        self.eps = eps

    def forward(self, yhat, y):
        return torch.sqrt(self.mse(yhat, y) + self.eps)


x = torch.randn(1, 1, requires_grad=True)
y = torch.zeros(1, 1)
criterion = RMSELoss()
loss = criterion(x * 0, y)
loss.backward()
print(x.grad)

model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data, target = torch.randn(16, 3), torch.randn(16, 1)
for _ in range(5):
    opt.zero_grad()
    criterion(model(data), target).backward()
    opt.step()
