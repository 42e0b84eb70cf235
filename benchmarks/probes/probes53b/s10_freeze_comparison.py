import torch
import torch.nn as nn
import torch.nn.functional as F


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(10, 10)
        self.classifier = nn.Linear(10, 2)

    def forward(self, x):
        return self.classifier(torch.relu(self.encoder(x)))


model = TwoTower()
for p in model.encoder.parameters():
    p.requires_grad == False  # ROOT
opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-2)
before = model.encoder.weight.clone()
for _ in range(2):
    loss = F.cross_entropy(model(torch.randn(4, 10)), torch.randint(0, 2, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("encoder moved:", not torch.equal(before, model.encoder.weight))
