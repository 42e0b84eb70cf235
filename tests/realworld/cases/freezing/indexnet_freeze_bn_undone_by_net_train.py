"""IndexNet matting: freeze_bn() puts every BatchNorm2d in eval mode when the network is built, but train() calls net.train() at the start of each epoch, which switches them back to training mode, so the "frozen" BatchNorm layers keep updating their running statistics.

source: https://github.com/poppinace/indexnet_matting/issues/35
kind: bug
symptom: silent
verified: after one epoch of 4 steps dec_bn.running_mean moved 0.12 (max abs) from its value when freeze_bn() ran and dec_bn.training is True; calling net.freeze_bn() after net.train() leaves it at 0.0
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class hlMobileNetV2UNetDecoder(nn.Module):
    def __init__(self, output_stride=32, freeze_bn=False):
        super(hlMobileNetV2UNetDecoder, self).__init__()
        self.enc_conv = nn.Conv2d(4, 16, 3, stride=2, padding=1, bias=False)
        self.enc_bn = nn.BatchNorm2d(16)
        self.dec_conv = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.dec_bn = nn.BatchNorm2d(16)
        self.pred = nn.Conv2d(16, 1, 1)
        if freeze_bn:
            self.freeze_bn()

    def forward(self, x):
        x = F.relu6(self.enc_bn(self.enc_conv(x)))
        x = F.relu6(self.dec_bn(self.dec_conv(x)))
        x = F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)
        return torch.sigmoid(self.pred(x))

    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()


def train(net, train_loader, optimizer, epoch):
    net.train()  # ROOT
    for i, (image, target) in enumerate(train_loader):
        outputs = net(image)
        loss = F.l1_loss(outputs, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
net = hlMobileNetV2UNetDecoder(freeze_bn=True)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
train_loader = [(torch.randn(4, 4, 16, 16) * 2 + 1, torch.rand(4, 1, 16, 16)) for _ in range(4)]
frozen_mean = net.dec_bn.running_mean.clone()
train(net, train_loader, optimizer, epoch=0)
print((net.dec_bn.running_mean - frozen_mean).abs().max().item(), net.dec_bn.training)
