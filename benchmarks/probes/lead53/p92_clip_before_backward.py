import torch
import torch.nn as nn


def train_step(model, batch, opt, max_norm=1.0):
    x, y = batch
    opt.zero_grad()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # ROOT
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    train_step(model, (torch.randn(4, 3), torch.randn(4, 1)), opt)
