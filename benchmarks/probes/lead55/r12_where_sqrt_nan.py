"""A distance loss guards sqrt with torch.where, but the unselected branch's gradient is NaN at zero."""
import torch
import torch.nn as nn


def pairwise_distance(a, b):
    sq = ((a.unsqueeze(1) - b.unsqueeze(0)) ** 2).sum(-1)
    return torch.where(sq > 0, torch.sqrt(sq), torch.zeros_like(sq))  # ROOT


def contrastive(emb, labels, margin=1.0):
    d = pairwise_distance(emb, emb)
    same = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
    return (same * d.pow(2) + (1 - same) * torch.clamp(margin - d, min=0).pow(2)).mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(6, 5)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    loss = contrastive(net(x), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("weights finite:", all(torch.isfinite(p).all().item() for p in net.parameters()))
