"""pytorch-deeplab-resnet: model.eval() is called once before training to use global BN statistics, and every BN parameter has requires_grad=False and is filtered out of the optimizer; the convolutions still train.

source: https://github.com/isht7/pytorch-deeplab-resnet/issues/39
kind: lookalike
verified: running_mean and the BN weight stay fixed while the conv weights change (the model has no dropout)
"""
import torch
import torch.nn as nn
import torch.optim as optim

affine_par = True


class Bottleneck(nn.Module):
    def __init__(self, inplanes, planes):
        super(Bottleneck, self).__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes, affine=affine_par)
        for i in self.bn1.parameters():
            i.requires_grad = False
        self.conv2 = nn.Conv2d(planes, inplanes, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(inplanes, affine=affine_par)
        for i in self.bn2.parameters():
            i.requires_grad = False
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class ResNet(nn.Module):
    def __init__(self, NoLabels):
        super(ResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8, affine=affine_par)
        for i in self.bn1.parameters():
            i.requires_grad = False
        self.layer1 = Bottleneck(8, 4)
        self.layer5 = nn.Conv2d(8, NoLabels, kernel_size=1, bias=True)

    def forward(self, x):
        return self.layer5(self.layer1(torch.relu(self.bn1(self.conv1(x)))))


def get_1x_lr_params_NOscale(model):
    b = [model.conv1, model.bn1, model.layer1]
    for i in range(len(b)):
        for j in b[i].modules():
            for k in j.parameters(recurse=False):
                if k.requires_grad:
                    yield k


def get_10x_lr_params(model):
    for j in model.layer5.parameters():
        yield j


torch.manual_seed(0)
model = ResNet(NoLabels=3)
model.eval()  # use_global_stats = True
base_lr, weight_decay = 2.5e-4, 5e-4
optimizer = optim.SGD([{'params': get_1x_lr_params_NOscale(model), 'lr': base_lr},
                       {'params': get_10x_lr_params(model), 'lr': 10 * base_lr}],
                      lr=base_lr, momentum=0.9, weight_decay=weight_decay)
conv_before = model.conv1.weight.clone()
bn_mean_before = model.bn1.running_mean.clone()
for iter in range(3):
    images, label = torch.randn(2, 3, 8, 8), torch.randint(0, 3, (2, 8, 8))
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(images), label)
    loss.backward()
    optimizer.step()
print(torch.equal(bn_mean_before, model.bn1.running_mean), not torch.equal(conv_before, model.conv1.weight))
