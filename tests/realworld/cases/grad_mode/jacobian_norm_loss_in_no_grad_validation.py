"""The loss penalises the norm of the input Jacobian; validating under torch.no_grad() makes autograd.grad fail.

source: https://github.com/pytorch/pytorch/issues/69217
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


def jacobian_loss(model, x, y, lam=0.1):
    x = x.clone().requires_grad_(True)
    out = model(x)
    jac = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
    return nn.functional.mse_loss(out, y) + lam * jac.norm()


def validate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():  # ROOT
        for x, y in loader:
            total += jacobian_loss(model, x, y).item()
    return total / len(loader)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
for x, y in train_loader:
    model.train()
    optimizer.zero_grad()
    loss = jacobian_loss(model, x, y)
    loss.backward()
    optimizer.step()
print("val", validate(model, train_loader[:1]))
