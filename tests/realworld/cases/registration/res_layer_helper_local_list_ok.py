"""The backbone collects blocks in a temporary list inside a helper; is that list hiding parameters?

source: https://github.com/open-mmlab/mmdetection/issues/472
kind: lookalike
"""
import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv = nn.Conv2d(planes, planes, 3, padding=1)
        self.bn = nn.BatchNorm2d(planes)

    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(x)))


def make_res_layer(block, planes, blocks):
    layers = []
    for i in range(blocks):
        layers.append(block(planes))
    return nn.Sequential(*layers)


class ResNet(nn.Module):
    def __init__(self, stage_blocks=(1, 2)):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.res_layers = []
        for i, num_blocks in enumerate(stage_blocks):
            res_layer = make_res_layer(BasicBlock, 4, num_blocks)
            layer_name = 'layer{}'.format(i + 1)
            self.add_module(layer_name, res_layer)
            self.res_layers.append(layer_name)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = self.stem(x)
        for layer_name in self.res_layers:
            x = getattr(self, layer_name)(x)
        return self.head(x.mean((2, 3)))


torch.manual_seed(0)
model = ResNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 0, 1])
for _ in range(5):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
