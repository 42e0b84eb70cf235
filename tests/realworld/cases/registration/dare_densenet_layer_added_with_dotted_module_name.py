"""DenseNet layer ported from old torchvision code registers its submodules as 'norm.1', 'relu.1', 'conv.1'.

source: https://github.com/mileyan/DARENet/issues/2
kind: bug
symptom: crash
verified: KeyError: 'module name can\\'t contain ".", got: norm.1'
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class _DenseLayer(nn.Sequential):
    def __init__(self, num_input_features, growth_rate, bn_size, drop_rate):
        super(_DenseLayer, self).__init__()
        self.add_module('norm.1', nn.BatchNorm2d(num_input_features)),  # ROOT
        self.add_module('relu.1', nn.ReLU(inplace=True)),
        self.add_module('conv.1', nn.Conv2d(num_input_features, bn_size * growth_rate,
                                            kernel_size=1, stride=1, bias=False)),
        self.add_module('norm.2', nn.BatchNorm2d(bn_size * growth_rate)),
        self.add_module('relu.2', nn.ReLU(inplace=True)),
        self.add_module('conv.2', nn.Conv2d(bn_size * growth_rate, growth_rate,
                                            kernel_size=3, stride=1, padding=1, bias=False)),
        self.drop_rate = drop_rate

    def forward(self, x):
        new_features = super(_DenseLayer, self).forward(x)
        return torch.cat([x, new_features], 1)


layer = _DenseLayer(8, 4, 2, 0.0)
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
out = layer(torch.randn(2, 8, 6, 6))
loss = out.pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
