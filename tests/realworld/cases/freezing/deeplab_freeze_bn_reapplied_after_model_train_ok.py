"""DeepLab with --freeze-bn: the trainer calls freeze_bn() again right after model.train() at each epoch.

source: https://github.com/jfzhang95/pytorch-deeplab-xception/issues/140
kind: lookalike
"""
import torch
import torch.nn as nn


class DeepLab(nn.Module):
    def __init__(self, num_classes=3, freeze_bn=False):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.decoder = nn.Conv2d(8, num_classes, 1)
        self.bn_freezed = freeze_bn
        if freeze_bn:
            self.freeze_bn()

    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()

    def forward(self, x):
        return self.decoder(self.backbone(x))


class Trainer:
    def __init__(self):
        self.model = DeepLab(freeze_bn=True)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def training(self, epoch, loader):
        self.model.train()
        if self.model.bn_freezed:
            self.model.freeze_bn()
        for image, target in loader:
            output = self.model(image)
            loss = self.criterion(output, target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


torch.manual_seed(0)
trainer = Trainer()
loader = [(torch.rand(4, 3, 16, 16) * 3, torch.randint(0, 3, (4, 16, 16))) for _ in range(4)]
before = trainer.model.backbone[1].running_mean.clone()
trainer.training(0, loader)
print((trainer.model.backbone[1].running_mean - before).abs().max().item())
