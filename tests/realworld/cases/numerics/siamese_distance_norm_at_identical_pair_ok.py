"""Contrastive loss computes the pair distance with Tensor.norm, whose gradient at a zero difference is 0.

source: https://github.com/pytorch/pytorch/issues/2721
kind: lookalike
"""
import torch
import torch.nn as nn


class SiameseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x1, x2):
        return self.embedding(x1), self.embedding(x2)


def contrastive_loss(out1, out2, label, margin=2.0):
    distance = (out1 - out2).norm(dim=1)
    return (label * distance ** 2 + (1 - label) * torch.clamp(margin - distance, min=0) ** 2).mean()


torch.manual_seed(0)
net = SiameseNet()
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
img0 = torch.randn(16, 20)
img1 = torch.randn(16, 20)
img1[:4] = img0[:4]  # the same image drawn twice as a positive pair
label = torch.cat([torch.ones(4), torch.randint(0, 2, (12,)).float()])
for it in range(3):
    out1, out2 = net(img0, img1)
    loss = contrastive_loss(out1, out2, label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(it, loss.item(), torch.isnan(net.embedding[0].weight).any().item())
