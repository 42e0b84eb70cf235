import torch
import torch.nn as nn


def make_optimizer(model, lr):
    return torch.optim.Adam([model.parameters()], lr=lr)  # ROOT


net = nn.Linear(3, 1)
opt = make_optimizer(net, 1e-3)
