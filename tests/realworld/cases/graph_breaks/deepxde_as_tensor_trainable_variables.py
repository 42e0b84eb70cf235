"""PDE coefficients passed through the backend's as_tensor helper lose their gradient.

source: https://github.com/lululxvi/deepxde/pull/1318
kind: bug
symptom: silent
verified: C1.grad and C2.grad stay None, the coefficients never change
"""
import torch
import torch.nn as nn


def as_tensor(data, dtype=None):
    if isinstance(data, torch.Tensor):
        return data if dtype is None else data.to(dtype)
    return torch.as_tensor(data, dtype=dtype)  # ROOT


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
C1 = torch.tensor(1.0, requires_grad=True)
C2 = torch.tensor(0.5, requires_grad=True)
optimizer = torch.optim.Adam(list(net.parameters()) + [C1, C2], lr=1e-2)
x = torch.linspace(0, 1, 32).unsqueeze(1).requires_grad_(True)
for it in range(20):
    optimizer.zero_grad()
    u = net(x)
    du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
    coeffs = as_tensor((C1, C2))
    residual = du - coeffs[0] * u - coeffs[1]
    loss = (residual ** 2).mean()
    loss.backward()
    optimizer.step()
print(C1.grad, C2.grad, C1.item(), C2.item())
