"""PyTorch-Tutorial-2nd's chapter 7.2 fine-tuning script after the fix of issue 7: the freeze loop sets param.requires_grad = False before the fc layer is replaced, so the optimizer built on resnet18_ft.parameters() only moves the new fc layer and the pretrained conv layers stay fixed. The frozen BatchNorm layers are put back in eval() after resnet18_ft.train() here: the tutorial's fixed script leaves them in train mode, so their running statistics keep moving under the new head, the bug of freezing/feature_extractor_frozen_by_requires_grad_keeps_bn_stats_moving (pytorch/pytorch#86590), a bug of its own, so it cannot stand as the correct look-alike (corrected after the blind measurement).

source: https://github.com/TingsongYu/PyTorch-Tutorial-2nd/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim


class BasicBlock(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + x)


class ResNet(nn.Module):  # a two-block stand-in for torchvision's resnet18
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(BasicBlock(16), BasicBlock(16))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.layer1(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


torch.manual_seed(0)
classes, LR = 2, 0.01
resnet18_ft = ResNet()
state_dict_load = ResNet().state_dict()  # stands for the downloaded resnet18-f37072fd.pth
resnet18_ft.load_state_dict(state_dict_load)

# method 1: freeze the conv layers
for param in resnet18_ft.parameters():
    param.requires_grad = False
print(sum(p.requires_grad for p in resnet18_ft.parameters()), "of", len(list(resnet18_ft.parameters())), "pretrained parameters require grad")

num_ftrs = resnet18_ft.fc.in_features
resnet18_ft.fc = nn.Linear(num_ftrs, classes)

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(resnet18_ft.parameters(), lr=LR, momentum=0.9)
conv1_before = resnet18_ft.conv1.weight.detach().clone()

resnet18_ft.train()
for m in resnet18_ft.modules():  # the frozen BatchNorm layers keep their pretrained statistics
    if isinstance(m, nn.BatchNorm2d):
        m.eval()
for i in range(3):
    inputs, labels = torch.randn(4, 3, 32, 32), torch.randint(0, classes, (4,))
    optimizer.zero_grad()
    outputs = resnet18_ft(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
print("conv1.weight moved", round((resnet18_ft.conv1.weight - conv1_before).norm().item(), 4))
