"""pytorch#71062: a siamese network whose linear weight is parametrized (torch.nn.utils.parametrize) is trained with the parametrization cache opened around several training steps; the cached weight is computed once, with a graph, so the second step's backward runs through the part of that graph the first backward already freed (albanD: "if you do multiple backwards within the cached context, you are trying to backward multiple times").

source: https://github.com/pytorch/pytorch/issues/71062
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
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
with parametrize.cached():  # ROOT
    for step in range(3):
        img0, img1, target = torch.randn(8, 16), torch.randn(8, 16), torch.rand(8)
        pred = model(img0, img1)
        loss = F.binary_cross_entropy_with_logits(pred, target)
        optimizer.zero_grad()
        loss.backward()  # SYMPTOM
        optimizer.step()
