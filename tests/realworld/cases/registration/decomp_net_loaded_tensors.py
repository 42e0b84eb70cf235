"""Decomp_Net takes its weights from a pretrained state dict as plain tensors; the optimizer gets nothing.

source: https://github.com/pytorch/examples/issues/277
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.fc1 = nn.Linear(10, 10)


class Decomp_Net(nn.Module):
    def __init__(self, pretrained):
        super(Decomp_Net, self).__init__()
        params = pretrained.state_dict()
        self.W_conv1 = params['conv1.weight'].view(10, 25)  # ROOT
        self.B_conv1 = params['conv1.bias']

    def forward(self, x):
        patches = F.unfold(x, kernel_size=5)
        return (self.W_conv1 @ patches + self.B_conv1[:, None]).mean(-1)


torch.manual_seed(0)
new_model = Decomp_Net(Net())
x = torch.randn(4, 1, 8, 8)
print(new_model(x).shape)
optimizer = torch.optim.SGD(new_model.parameters(), lr=0.01, momentum=0.5)  # SYMPTOM
