"""ModuleValidator.fix(model) swaps BatchNorm for GroupNorm after model.parameters() went to the optimizer.

source: https://github.com/meta-pytorch/opacus/issues/432
kind: bug
symptom: silent
verified: model.bn.weight (the new GroupNorm) never changes and has .grad but is not in optimizer
"""
import torch
import torch.nn as nn


class ModuleValidator:
    @staticmethod
    def fix(module):
        for name, child in module.named_children():
            if isinstance(child, nn.BatchNorm2d):
                setattr(module, name, nn.GroupNorm(1, child.num_features))
            else:
                ModuleValidator.fix(child)
        return module


class SampleConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.mean((2, 3)))


torch.manual_seed(0)
model = SampleConvNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model = ModuleValidator.fix(model)  # ROOT
x, y = torch.randn(8, 1, 6, 6), torch.randint(0, 2, (8,))
for _ in range(5):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
