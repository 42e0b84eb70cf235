"""A classifier wrapper whose no_grad predict() is reused inside the training step."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier:
    def __init__(self, in_dim, n_cls):
        self.net = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, n_cls))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    @torch.no_grad()  # ROOT
    def predict(self, x):
        return self.net(x)

    def train_step(self, x, y):
        logits = self.predict(x)  # ROOT
        loss = F.cross_entropy(logits, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss)


if __name__ == "__main__":
    clf = Classifier(8, 3)
    for _ in range(3):
        clf.train_step(torch.randn(16, 8), torch.randint(0, 3, (16,)))
