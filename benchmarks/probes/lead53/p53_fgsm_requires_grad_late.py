import torch
import torch.nn as nn
import torch.nn.functional as F


def fgsm(model, x, y, eps):
    out = model(x)
    x.requires_grad = True  # ROOT
    loss = F.cross_entropy(out, y)
    model.zero_grad()
    loss.backward()
    return (x + eps * x.grad.sign()).clamp(0, 1)


model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
x = torch.rand(4, 1, 4, 4)
y = torch.randint(0, 3, (4,))
adv = fgsm(model, x, y, 0.1)
