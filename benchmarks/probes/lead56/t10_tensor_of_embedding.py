"""A pooling head copies the encoder's output with torch.tensor before the classifier."""
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 24)

    def forward(self, x):
        return torch.relu(self.proj(x))


class Head(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.fc = nn.Linear(24, 2)

    def forward(self, x):
        feats = torch.tensor(self.encoder(x).mean(dim=1))  # ROOT
        return self.fc(feats)


if __name__ == "__main__":
    model = Head(Encoder())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(torch.randn(4, 7, 12)), torch.randint(0, 2, (4,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
