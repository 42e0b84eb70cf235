import torch
import torch.nn as nn


def inflate_first_conv(model, pretrained_weight):
    """Copy RGB filters from a 3-channel checkpoint into a 4-channel stem."""
    stem = model[0]
    stem.weight[:, :3] = pretrained_weight  # ROOT
    stem.weight[:, 3:] = pretrained_weight.mean(1, keepdim=True)
    return model


model = nn.Sequential(nn.Conv2d(4, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
ckpt = torch.randn(8, 3, 3, 3)
inflate_first_conv(model, ckpt)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(2, 4, 8, 8)).sum()
loss.backward()
opt.step()
