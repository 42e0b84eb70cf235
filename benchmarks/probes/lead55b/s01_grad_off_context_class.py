"""A home-made context manager for evaluation turns grad off and never turns it back on."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class EvalMode:
    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.was_training = self.model.training
        self.model.eval()
        torch.set_grad_enabled(False)  # ROOT
        return self.model

    def __exit__(self, *exc):
        self.model.train(self.was_training)
        return False


def evaluate(model, data):
    with EvalMode(model) as m:
        return sum(F.cross_entropy(m(x), y).item() for x, y in data) / len(data)


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
train = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(4)]
for epoch in range(2):
    for x, y in train:
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("val", evaluate(net, train[:2]))
