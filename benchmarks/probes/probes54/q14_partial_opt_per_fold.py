from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_model():
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))


make_opt = partial(torch.optim.AdamW, lr=1e-2, weight_decay=0.01)
model = make_model()
opt = make_opt(model.parameters())
for fold in range(2):
    model = make_model()  # ROOT
    before = model[0].weight.clone()
    for _ in range(3):
        x, y = torch.randn(16, 5), torch.randn(16, 1)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("fold", fold, "moved:", not torch.equal(before, model[0].weight))
