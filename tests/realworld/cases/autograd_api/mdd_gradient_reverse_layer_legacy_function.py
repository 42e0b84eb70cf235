"""The gradient reversal layer is an old-style autograd.Function instance with a non-static forward.

source: https://github.com/thuml/MDD/issues/6
kind: bug
symptom: crash
verified: Legacy autograd function with non-static forward method is deprecated
"""
import numpy as np
import torch
import torch.nn as nn


class GradientReverseLayer(torch.autograd.Function):
    def __init__(self, iter_num=0, alpha=1.0, low_value=0.0, high_value=0.1, max_iter=1000.0):
        self.iter_num = iter_num
        self.alpha = alpha
        self.low_value = low_value
        self.high_value = high_value
        self.max_iter = max_iter

    def forward(self, input):  # ROOT
        self.iter_num += 1
        output = input * 1.0
        return output

    def backward(self, grad_output):
        self.coeff = float(2.0 * (self.high_value - self.low_value) / (1.0 + np.exp(-self.alpha * self.iter_num / self.max_iter)) - (self.high_value - self.low_value) + self.low_value)
        return -self.coeff * grad_output


class MDDNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.base_network = nn.Linear(8, 16)
        self.grl_layer = GradientReverseLayer()
        self.classifier_layer = nn.Linear(16, 3)
        self.classifier_layer_2 = nn.Linear(16, 3)

    def forward(self, inputs):
        features = self.base_network(inputs)
        features_adv = self.grl_layer(features)  # SYMPTOM
        return self.classifier_layer(features), self.classifier_layer_2(features_adv)


torch.manual_seed(0)
net = MDDNet()
outputs, outputs_adv = net(torch.randn(4, 8))
(outputs.sum() + outputs_adv.sum()).backward()
