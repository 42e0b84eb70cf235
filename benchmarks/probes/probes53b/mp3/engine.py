import torch
import torch.nn.functional as F


def evaluate(model, loader):
    model.eval()
    torch.set_grad_enabled(False)  # ROOT
    correct = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
    model.train()
    return correct


def train_epoch(model, loader, opt):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
