"""A functional_call trainer passes detached copies of the parameters, so the model gets no gradient."""
import torch
import torch.nn as nn
from torch.func import functional_call


def loss_fn(model, params, x, y):
    pred = functional_call(model, params, (x,))
    return nn.functional.mse_loss(pred, y)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    params = {k: v.detach() for k, v in model.named_parameters()}  # ROOT
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    loss = loss_fn(model, params, x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
