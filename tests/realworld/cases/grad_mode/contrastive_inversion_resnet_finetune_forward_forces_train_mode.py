"""Contrastive-Inversion's `RESNET_finetune` baseline calls `self.feature_extractor.train()` at the top of every `forward` when the backbone is fine-tuned (`freeze_backbone` off): when the trainer switches the model to eval mode for validation, the first forward switches the backbone back to training mode, so its batch-norm layers normalise the validation images with the batch's statistics and overwrite the running statistics learned in training with validation data, with no error.

source: https://github.com/Sriram-Ravula/Contrastive-Inversion/commit/fa7d43c74d4f4588f91706943b7b459d9d2836fc
kind: bug
symptom: silent
verified: the validation pass changes the backbone's running means (changed: True), and the same validation images score 1.000 accuracy in batches of 64 but 0.598 in batches of 4 (the look-alike: unchanged, 1.000 in both)
"""
import argparse

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class TinyResNet(nn.Module):
    """Stand-in for torchvision's resnet50: conv/batch-norm stem, one residual block, pooling, fc."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)


class RESNET_finetune(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        backbone = TinyResNet()
        num_filters = backbone.fc.in_features

        layers = list(backbone.children())[:-1]  # leave out the fc layer
        self.feature_extractor = nn.Sequential(*layers)
        self.classifier = nn.Linear(num_filters, args.num_classes)

        if args.freeze_backbone:
            self.feature_extractor.eval()
            for param in self.feature_extractor.parameters():
                param.requires_grad = False
        else:
            self.feature_extractor.train()

    def forward(self, x):
        if self.args.freeze_backbone:
            self.feature_extractor.eval()
            with torch.no_grad():
                features = self.feature_extractor(x).flatten(1)
        else:
            self.feature_extractor.train()  # ROOT
            features = self.feature_extractor(x).flatten(1)
        return self.classifier(features)


class Baseline(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.hparams = args
        self.encoder = RESNET_finetune(args)
        self.criterion = nn.CrossEntropyLoss(reduction="sum")

    def forward(self, x):
        return self.encoder(x)

    def training_step(self, batch):
        x, y = batch
        return self.criterion(self(x), y) / len(y)

    @torch.no_grad()
    def validate(self, images, labels, batch_size):
        self.eval()
        correct = 0
        for x, y in zip(images.split(batch_size), labels.split(batch_size)):
            correct += (self(x).argmax(1) == y).sum().item()
        self.train()
        return correct / len(labels)


def make_images(n):
    labels = torch.randint(0, 4, (n,))
    images = torch.randn(n, 3, 12, 12) * 0.5
    images[:, 0] += labels.view(-1, 1, 1).float() - 1.5   # class shifts the red channel
    images[:, 1] += 2.0
    return images, labels


args = argparse.Namespace(num_classes=4, freeze_backbone=False, lr=3e-3, batch_size=32)
model = Baseline(args)
opt = torch.optim.Adam(model.encoder.parameters(), lr=args.lr)
train_x, train_y = make_images(512)
for epoch in range(3):
    for x, y in zip(train_x.split(args.batch_size), train_y.split(args.batch_size)):
        loss = model.training_step((x, y))
        opt.zero_grad()
        loss.backward()
        opt.step()

val_x, val_y = make_images(256)
bn = model.encoder.feature_extractor[1]
before = bn.running_mean.clone()
acc_64 = model.validate(val_x, val_y, batch_size=64)
changed = not torch.equal(before, bn.running_mean)
acc_4 = model.validate(val_x, val_y, batch_size=4)
print(f"validation changed the backbone's running means: {changed}")
print(f"validation accuracy in batches of 64: {acc_64:.3f}, in batches of 4: {acc_4:.3f}")
