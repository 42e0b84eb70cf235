"""Unsupervised segmentation net: the repeated conv and batch-norm layers live in plain lists.

source: https://github.com/kanezaki/pytorch-unsupervised-segmentation/pull/6
kind: bug
symptom: silent
verified: model.conv2[0].weight never changes and model.bn2[0] ignores model.eval()
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

nChannel, nConv = 8, 3


class MyNet(nn.Module):
    def __init__(self, input_dim):
        super(MyNet, self).__init__()
        self.conv1 = nn.Conv2d(input_dim, nChannel, kernel_size=3, stride=1, padding=1)
        self.bn1 = nn.BatchNorm2d(nChannel)
        self.conv2 = []  # ROOT
        self.bn2 = []
        for i in range(nConv - 1):
            self.conv2.append(nn.Conv2d(nChannel, nChannel, kernel_size=3, stride=1, padding=1))
            self.bn2.append(nn.BatchNorm2d(nChannel))
        self.conv3 = nn.Conv2d(nChannel, nChannel, kernel_size=1, stride=1, padding=0)
        self.bn3 = nn.BatchNorm2d(nChannel)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(nConv - 1):
            x = F.relu(self.bn2[i](self.conv2[i](x)))
        return self.bn3(self.conv3(x))


torch.manual_seed(0)
data = torch.rand(1, 3, 12, 12)
model = MyNet(data.size(1))
model.train()
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for batch_idx in range(5):
    optimizer.zero_grad()
    output = model(data)[0].permute(1, 2, 0).contiguous().view(-1, nChannel)
    _, target = torch.max(output, 1)
    loss = loss_fn(output, target)
    loss.backward()
    optimizer.step()
