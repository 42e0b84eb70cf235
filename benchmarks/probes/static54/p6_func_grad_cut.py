import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, grad_and_value

model = torch.nn.Linear(3, 1)
params = {k: v.detach() for k, v in model.named_parameters()}
x, y = torch.randn(8, 3), torch.randn(8, 1)


def loss_fn(p, x, y):
    pred = functional_call(model, p, (x,))
    return torch.as_tensor(F.mse_loss(pred, y).item())


def loss_det(p, x, y):
    return F.mse_loss(functional_call(model, p, (x,)), y).detach()


print({k: v.abs().sum().item() for k, v in grad(loss_fn)(params, x, y).items()})
print({k: v.abs().sum().item() for k, v in grad_and_value(loss_det)(params, x, y)[0].items()})
f = lambda w: torch.tensor((x @ w).sum().item())
print(torch.autograd.functional.jacobian(f, torch.randn(3, 1)).abs().sum())
