import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        with torch.no_grad():  # ROOT
            feats = self.backbone(x)
        return self.head(feats)


model = Classifier()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
