"""DiverseBranchBlock in a YOLO-style trainer: BNAndPadLayer exposes its BN weight, so it lands in two param groups.

source: https://github.com/DingXiaoH/DiverseBranchBlock/issues/25
kind: bug
symptom: crash
verified: some parameters appear in more than one parameter group
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BNAndPadLayer(nn.Module):
    def __init__(self, pad_pixels, num_features):
        super(BNAndPadLayer, self).__init__()
        self.bn = nn.BatchNorm2d(num_features)
        self.pad_pixels = pad_pixels

    def forward(self, input):
        output = self.bn(input)
        return F.pad(output, [self.pad_pixels] * 4) if self.pad_pixels > 0 else output

    @property
    def weight(self):
        return self.bn.weight

    @property
    def bias(self):
        return self.bn.bias


class DiverseBranchBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, padding=1):
        super().__init__()
        self.dbb_origin = nn.Sequential(nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=False),
                                        nn.BatchNorm2d(out_channels))
        self.dbb_1x1_kxk = nn.Sequential(nn.Conv2d(in_channels, in_channels, 1, bias=False),
                                         BNAndPadLayer(pad_pixels=padding, num_features=in_channels),
                                         nn.Conv2d(in_channels, out_channels, kernel_size, bias=False),
                                         nn.BatchNorm2d(out_channels))

    def forward(self, inputs):
        return F.relu(self.dbb_origin(inputs) + self.dbb_1x1_kxk(inputs))


torch.manual_seed(0)
model = nn.Sequential(DiverseBranchBlock(3, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
g0, g1, g2 = [], [], []  # optimizer parameter groups
for v in model.modules():
    if hasattr(v, 'bias') and isinstance(v.bias, nn.Parameter):
        g2.append(v.bias)  # biases
    if isinstance(v, nn.BatchNorm2d):  # ROOT
        g0.append(v.weight)  # no decay
    elif hasattr(v, 'weight') and isinstance(v.weight, nn.Parameter):
        g1.append(v.weight)  # apply decay
optimizer = torch.optim.SGD(g0, lr=0.01, momentum=0.937, nesterov=True)
optimizer.add_param_group({'params': g1, 'weight_decay': 5e-4})  # SYMPTOM
optimizer.add_param_group({'params': g2})
loss = F.cross_entropy(model(torch.rand(2, 3, 8, 8)), torch.tensor([0, 1]))
loss.backward()
optimizer.step()
