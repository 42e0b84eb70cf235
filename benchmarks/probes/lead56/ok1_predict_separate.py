"""Look-alike: predict() is no_grad, train_step calls the network directly."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier:
    def __init__(self, in_dim, n_cls):
        self.net = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, n_cls))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    @torch.no_grad()
    def predict(self, x):
        return self.net(x)

    def train_step(self, x, y):
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        acc = (self.predict(x).argmax(1) == y).float().mean()
        return float(loss), float(acc)


if __name__ == "__main__":
    clf = Classifier(8, 3)
    for _ in range(3):
        clf.train_step(torch.randn(16, 8), torch.randint(0, 3, (16,)))
