"""scratchai's fast gradient method makes `x` a fresh leaf with `x.clone().detach().requires_grad_(True)` and only then, when no label is given and the image is 3-D, rebinds `x = x.unsqueeze(0)`; the unsqueezed tensor is not a leaf, so `loss.backward()` leaves `x.grad` as None and `optimize_linear` fails on it when attacking a single image.

source: https://github.com/iArunava/scratchai/pull/39
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'size'
"""
import numpy as np
import torch
import torch.nn as nn


def optimize_linear(grads, eps, ordr):
    red_ind = list(range(1, len(grads.size())))  # SYMPTOM
    if ordr == np.inf:
        opt_pert = torch.sign(grads)
    elif ordr == 2:
        square = torch.max(torch.tensor(1e-12), torch.sum(grads ** 2, red_ind, keepdim=True))
        opt_pert = grads / torch.sqrt(square)
    else:
        raise NotImplementedError
    return eps * opt_pert


def fgm(x, net, eps=0.3, ordr=np.inf, y=None, clip_min=None, clip_max=None, targeted=False):
    # x needs to have requires_grad set to True
    # for its grad to be computed and stored properly in a backward call
    x = x.clone().detach().requires_grad_(True)
    if y is None:
        if len(x.shape) == 3:
            x = x.unsqueeze(0)  # ROOT
        _, y = torch.max(net(x), dim=1)

    crit = nn.CrossEntropyLoss()
    loss = crit(net(x), y)
    if targeted:
        loss = -loss

    loss.backward()
    opt_pert = optimize_linear(x.grad, eps, ordr)

    adv_x = x + opt_pert
    if (clip_min is not None) or (clip_max is not None):
        adv_x = torch.clamp(adv_x, clip_min, clip_max)
    return adv_x


class FGM():
    def __init__(self, net, **kwargs):
        self.net = net
        self.kwargs = kwargs

    def __call__(self, x):
        return fgm(x, self.net, **self.kwargs)


def freeze(net):
    for p in net.parameters():
        p.requires_grad_(False)


torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)).eval()
freeze(net)
atk = FGM(net, eps=0.03)
img = torch.rand(3, 32, 32)
adv = atk(img)
print(adv.shape, (adv.squeeze(0) - img).abs().max().item())
