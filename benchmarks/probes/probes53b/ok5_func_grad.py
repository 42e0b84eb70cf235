import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad

model = nn.Linear(3, 1)
params = {k: v.detach() for k, v in model.named_parameters()}


def loss_fn(p, x, y):
    return F.mse_loss(functional_call(model, p, (x,)), y)


for _ in range(2):
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    g = grad(loss_fn)(params, x, y)
    params = {k: params[k] - 0.1 * g[k] for k in params}
print("ok", loss_fn(params, x, y).item())
