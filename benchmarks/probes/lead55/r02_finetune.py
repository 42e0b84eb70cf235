"""Fine-tune: the optimizer is made before the head is swapped for the new task."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from r02_heads import adapt_head


class TinyNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


def main():
    torch.manual_seed(0)
    model = TinyNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model = adapt_head(model, num_classes=4)  # ROOT (second root, marked after first contact)
    before = model.fc.weight.detach().clone()
    for _ in range(5):
        x, y = torch.randn(16, 12), torch.randint(0, 4, (16,))
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("head moved:", not torch.equal(before, model.fc.weight))


if __name__ == "__main__":
    main()
