"""RefineNet with a frozen ResNet stem passes all net.parameters() to Adam; current PyTorch accepts params with requires_grad=False and never updates them.

source: https://github.com/thomasjpfan/pytorch_refinenet/issues/3
kind: lookalike
"""
import torch
import torch.nn as nn


class RefineNet4Cascade(nn.Module):
    def __init__(self, num_classes=24):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        for p in self.layer1.parameters():
            p.requires_grad = False
        self.refine = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.clf = nn.Conv2d(8, num_classes, 1)

    def forward(self, x):
        return self.clf(self.refine(self.layer1(x)))


torch.manual_seed(0)
net = RefineNet4Cascade(num_classes=24)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-4, weight_decay=1e-5)
stem_before = net.layer1[0].weight.detach().clone()
x_var, target = torch.randn(1, 3, 16, 16), torch.randint(0, 24, (1, 16, 16))
for step in range(3):
    y = net(x_var)
    loss = nn.functional.cross_entropy(y, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
assert torch.equal(net.layer1[0].weight, stem_before)
