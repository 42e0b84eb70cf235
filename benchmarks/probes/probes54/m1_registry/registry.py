import torch
import torch.nn as nn

MODELS = {}
OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}


def register(name):
    def deco(cls):
        MODELS[name] = cls
        return cls
    return deco


@register("mlp")
class MLP(nn.Module):
    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))

    def forward(self, x):
        return self.body(x)


def build_model(cfg):
    return MODELS[cfg["name"]](**cfg["args"])


def build_optimizer(cfg, model):
    return OPTIMIZERS[cfg["type"]](model.parameters(), lr=cfg["lr"])
