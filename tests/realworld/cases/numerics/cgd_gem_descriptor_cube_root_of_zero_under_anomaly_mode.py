"""CGD GlobalDescriptor (GeM, p=3): sign(s) * |s|.pow(1/p) of the pooled mean is the cube root of 0 for a channel the ReLU zeroed out, whose gradient is inf * 0 = NaN; train.py runs under torch.autograd.detect_anomaly().

source: https://github.com/leftthomas/CGD/issues/12
kind: bug
symptom: crash
verified: Function 'PowBackward0' returned nan values in its 0th output
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GlobalDescriptor(nn.Module):
    def __init__(self, p=1):
        super().__init__()
        self.p = p

    def forward(self, x):
        assert x.dim() == 4, 'the input tensor of GlobalDescriptor must be the shape of [B, C, H, W]'
        if self.p == 1:
            return x.mean(dim=[-1, -2])
        elif self.p == float('inf'):
            return torch.flatten(F.adaptive_max_pool2d(x, output_size=(1, 1)), start_dim=1)
        else:
            sum_value = x.pow(self.p).mean(dim=[-1, -2])
            return torch.sign(sum_value) * (torch.abs(sum_value).pow(1.0 / self.p))  # ROOT


class L2Norm(nn.Module):
    def forward(self, x):
        return F.normalize(x, p=2, dim=-1)


class Model(nn.Module):
    def __init__(self, gd_config='SG', feature_dim=8, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        n = len(gd_config)
        k = feature_dim // n
        self.global_descriptors, self.main_modules = [], []
        for i in range(n):
            p = 1 if gd_config[i] == 'S' else 3 if gd_config[i] == 'G' else float('inf')
            self.global_descriptors.append(GlobalDescriptor(p=p))
            self.main_modules.append(nn.Sequential(nn.Linear(8, k, bias=False), L2Norm()))
        self.global_descriptors = nn.ModuleList(self.global_descriptors)
        self.main_modules = nn.ModuleList(self.main_modules)
        self.auxiliary_module = nn.Sequential(nn.BatchNorm1d(8), nn.Linear(8, num_classes, bias=True))

    def forward(self, x):
        shared = self.features(x)
        gds, classes = [], None
        for i in range(len(self.global_descriptors)):
            gd = self.global_descriptors[i](shared)
            if i == 0:
                classes = self.auxiliary_module(gd)
            gds.append(self.main_modules[i](gd))
        return F.normalize(torch.cat(gds, dim=-1), dim=-1), classes


torch.manual_seed(0)
net = Model()
with torch.no_grad():
    net.features[0].bias[3] = -100.0  # a filter that never fires on these images
optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
inputs, labels = torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
with torch.autograd.detect_anomaly():
    features, classes = net(inputs)
    loss = F.cross_entropy(classes, labels) + features.pow(2).sum(-1).mean()
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
