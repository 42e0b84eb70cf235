"""Transfer learning freezes the CNN feature extractor with requires_grad=False but trains in model.train(), so BatchNorm running stats keep updating.

source: https://github.com/pytorch/pytorch/issues/86590
kind: bug
symptom: silent
verified: after 5 training steps the frozen backbone's BatchNorm running_mean moved by 0.44 (max abs); 0.0 with the BatchNorm layers put back in eval() after net.train()
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5),
)
for param in net[:-1].parameters():
    param.requires_grad = False
optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
stats_before = net[1].running_mean.clone()

for epoch in range(5):
    net.train()  # ROOT
    x, y = torch.randn(16, 3, 8, 8) * 2 + 1, torch.randint(0, 5, (16,))
    loss = nn.functional.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((net[1].running_mean - stats_before).abs().max().item())
