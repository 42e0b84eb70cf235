"""RK-Net USAM: att = self.relu(att) is the output a non-in-place ReLU saves for backward, and the polish step writes zeros into its border rows and columns in place (att[:, :, :, 0] = 0 ...), so backward finds it modified.

source: https://github.com/AggMan96/RK-Net/issues/9
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class USAM(nn.Module):
    def __init__(self, kernel_size=3, padding=1, polish=True):
        super(USAM, self).__init__()
        kernel = torch.ones((kernel_size, kernel_size)).unsqueeze(0).unsqueeze(0)
        self.weight = nn.Parameter(data=kernel, requires_grad=False)
        kernel2 = (torch.ones((1, 1)) * (kernel_size * kernel_size)).unsqueeze(0).unsqueeze(0)
        self.weight2 = nn.Parameter(data=kernel2, requires_grad=False)
        self.polish = polish
        self.pad = padding
        self.relu = nn.ReLU()
        self.bn = nn.BatchNorm2d(1)

    def __call__(self, x):
        fmap = x.sum(1, keepdim=True)
        x1 = F.conv2d(fmap, self.weight, padding=self.pad)
        x2 = F.conv2d(fmap, self.weight2, padding=0)
        att = x2 - x1
        att = self.bn(att)
        att = self.relu(att)
        if self.polish:
            att[:, :, :, 0] = 0  # ROOT
            att[:, :, :, -1] = 0
            att[:, :, 0, :] = 0
            att[:, :, -1, :] = 0
        output = x + att * x
        return output


class ft_net(nn.Module):
    def __init__(self, class_num):
        super(ft_net, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.usam_1 = USAM()
        self.layer1 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.usam_2 = USAM()
        self.avgpool2 = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Linear(16, class_num)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.usam_1(x)
        x = self.usam_2(self.layer1(x))
        x = self.avgpool2(x).view(x.size(0), -1)
        return self.classifier(x)


torch.manual_seed(0)
model = ft_net(class_num=10)
optimizer_ft = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss()
for inputs, labels in [(torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))) for _ in range(2)]:
    optimizer_ft.zero_grad()
    outputs = model(inputs)
    loss = criterion(outputs, labels)
    loss.backward()  # SYMPTOM
    optimizer_ft.step()
