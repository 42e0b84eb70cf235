"""pytorch#71062 siamese network with the parametrization cache opened inside each training step, around that step's forward, loss and backward only, so each cached weight is used by exactly one backward.

source: https://github.com/pytorch/pytorch/issues/71062
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as parametrize


class RowNormalized(nn.Module):
    def forward(self, X):
        return X / X.norm(dim=1, keepdim=True)


class SiameseNet(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.encoder = nn.Linear(dim, dim)
        parametrize.register_parametrization(self.encoder, "weight", RowNormalized())
        self.head = nn.Linear(2 * dim, 1)

    def forward(self, img0, img1):
        f0, f1 = torch.tanh(self.encoder(img0)), torch.tanh(self.encoder(img1))
        return self.head(torch.cat([f0, f1], dim=1)).squeeze(1)


torch.manual_seed(0)
model = SiameseNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    img0, img1, target = torch.randn(8, 16), torch.randn(8, 16), torch.rand(8)
    with parametrize.cached():
        pred = model(img0, img1)
        loss = F.binary_cross_entropy_with_logits(pred, target)
        optimizer.zero_grad()
        loss.backward()
    optimizer.step()
