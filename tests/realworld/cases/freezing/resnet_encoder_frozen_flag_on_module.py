"""ResnetEncoder(frozen=True) sets requires_grad on the feature module itself, which freezes nothing.

source: https://github.com/catalyst-team/catalyst/issues/79
kind: bug
symptom: silent
verified: model.enc.feature_net[0].weight changes after one optimizer step
"""
import torch
import torch.nn as nn


class ResnetEncoder(nn.Module):
    def __init__(self, frozen=True):
        super().__init__()
        self.feature_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.feature_net.requires_grad = not frozen  # ROOT
        self.out_features = 8

    def forward(self, x):
        return self.feature_net(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = ResnetEncoder(frozen=True)
        self.logits = nn.Linear(self.enc.out_features, 1)

    def forward(self, x):
        return self.logits(self.enc(x))


torch.manual_seed(0)
model = Net()
old_value = model.enc.feature_net[0].weight[0, 0, 0, 0].item()
inputs, targets = torch.randn(8, 3, 16, 16), torch.ones(8, 1)
optimizer = torch.optim.Adam(model.parameters())
criterion = nn.BCEWithLogitsLoss()
optimizer.zero_grad()
loss = criterion(model(inputs), targets)
loss.backward()
optimizer.step()
print(old_value, model.enc.feature_net[0].weight[0, 0, 0, 0].item())
