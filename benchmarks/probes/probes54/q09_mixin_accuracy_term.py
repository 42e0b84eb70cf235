import torch
import torch.nn as nn
import torch.nn.functional as F


class SoftAccuracyMixin:
    margin = 0.1

    def objective(self, logits, target):
        hits = (logits.argmax(dim=1) == target).float()  # ROOT
        return 1.0 - hits.mean() + self.margin


class Classifier(SoftAccuracyMixin, nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 24), nn.GELU(), nn.Linear(24, 3))

    def forward(self, x):
        return self.net(x)


clf = Classifier()
opt = torch.optim.SGD(clf.parameters(), lr=0.1)
for _ in range(2):
    x, y = torch.randn(16, 12), torch.randint(0, 3, (16,))
    loss = clf.objective(clf(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
