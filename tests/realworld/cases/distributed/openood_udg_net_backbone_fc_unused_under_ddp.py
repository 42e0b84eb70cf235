"""OpenOOD's `UDGNet` wraps a ResNet backbone and adds its own class head `fc` and cluster head `fc_aux`, but keeps the backbone's `fc`: the backbone's forward still computes `logits_cls` with it, `UDGNet.forward` throws those logits away (`_, feature = self.backbone(x, return_feature=True)`), and the backbone's `fc` never receives a gradient. Wrapped in `DistributedDataParallel` (default `find_unused_parameters=False`), the first step passes and the second forward fails because the reduction of the first never finished.

source: https://github.com/Jingkang50/OpenOOD/commit/f28c027c043bd245c93765a87b3a0cd35f5b8961
kind: bug
symptom: crash
verified: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetSmall(nn.Module):
    """A two-stage stand-in for OpenOOD's ResNet18_32x32 with the same forward interface."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)
        self.feature_size = 32

    def forward(self, x, return_feature=False):
        feature = self.layer2(self.layer1(F.relu(self.bn1(self.conv1(x)))))
        feature = self.avgpool(feature).view(feature.size(0), -1)
        logits_cls = self.fc(feature)
        if return_feature:
            return logits_cls, feature
        return logits_cls


class UDGNet(nn.Module):
    def __init__(self, backbone, num_classes, num_clusters):
        super().__init__()
        self.backbone = backbone  # ROOT
        self.fc = nn.Linear(backbone.feature_size, num_classes)
        self.fc_aux = nn.Linear(backbone.feature_size, num_clusters)

    def forward(self, x, return_feature=False, return_aux=False):
        _, feature = self.backbone(x, return_feature=True)
        logits_cls = self.fc(feature)
        logits_aux = self.fc_aux(feature)
        if return_aux:
            if return_feature:
                return logits_cls, logits_aux, feature
            return logits_cls, logits_aux
        if return_feature:
            return logits_cls, feature
        return logits_cls


class UDGTrainer:
    def __init__(self, net, lr=0.05, lambda_aux=0.5):
        self.net = net
        self.lambda_aux = lambda_aux
        self.optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)

    def train_step(self, images, labels, cluster_ids):
        self.net.train()
        logits_cls, logits_aux = self.net(images, return_aux=True)
        loss = F.cross_entropy(logits_cls, labels) + self.lambda_aux * F.cross_entropy(logits_aux, cluster_ids)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    tmp = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "pg"), rank=0, world_size=1)
    try:
        net = DDP(UDGNet(ResNetSmall(num_classes=10), num_classes=10, num_clusters=20))
        trainer = UDGTrainer(net)
        for step in range(4):
            images = torch.randn(16, 3, 16, 16)
            labels = torch.randint(0, 10, (16,))
            cluster_ids = torch.randint(0, 20, (16,))
            print(f"step {step}: loss {trainer.train_step(images, labels, cluster_ids):.3f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
