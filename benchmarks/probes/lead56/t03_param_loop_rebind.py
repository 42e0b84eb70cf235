"""Hand-written SGD over the parameter list rebinds the loop variable instead of updating."""
import torch
import torch.nn as nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 8)
        self.l2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))


def sgd_update(model, lr):
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p = p - lr * p.grad  # ROOT
                model.zero_grad()


def main():
    net = TinyNet()
    x, y = torch.randn(32, 3), torch.randn(32, 1)
    for _ in range(5):
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        sgd_update(net, 0.1)


if __name__ == "__main__":
    main()
