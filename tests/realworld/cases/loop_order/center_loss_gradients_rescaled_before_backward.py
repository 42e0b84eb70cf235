"""Center-loss gradients rescaled by 1/weight_cent before loss.backward(), while param.grad is still None.

source: https://github.com/KaiyangZhou/pytorch-center-loss/issues/4
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'data'
"""
import torch
import torch.nn as nn


class CenterLoss(nn.Module):
    def __init__(self, num_classes=10, feat_dim=2):
        super(CenterLoss, self).__init__()
        self.centers = nn.Parameter(torch.randn(num_classes, feat_dim))

    def forward(self, x, labels):
        return ((x - self.centers[labels]) ** 2).sum(dim=1).mean() / 2


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2))
classifier = nn.Linear(2, 10)
criterion_xent = nn.CrossEntropyLoss()
criterion_cent = CenterLoss(num_classes=10, feat_dim=2)
optimizer_model = torch.optim.SGD(list(model.parameters()) + list(classifier.parameters()), lr=0.001)
optimizer_centloss = torch.optim.SGD(criterion_cent.parameters(), lr=0.5)
weight_cent = 1.0

for step in range(3):
    data, labels = torch.randn(16, 20), torch.randint(0, 10, (16,))
    features = model(data)
    loss = criterion_xent(classifier(features), labels) + criterion_cent(features, labels) * weight_cent
    optimizer_model.zero_grad()
    optimizer_centloss.zero_grad()
    for param in criterion_cent.parameters():
        param.grad.data *= (1. / weight_cent)  # ROOT
    loss.backward()
    optimizer_model.step()
    optimizer_centloss.step()
