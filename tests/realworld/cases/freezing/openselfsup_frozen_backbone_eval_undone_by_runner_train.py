"""OpenSelfSup's linear-classification configs freeze the pre-trained backbone with the model-level `frozen_backbone=True`, which `Classification.__init__` implements as `self.backbone.eval()` plus `requires_grad = False`; the runner calls `model.train()` at the start of every epoch, which puts the backbone's BatchNorm layers back in training mode, so the "frozen" backbone's running statistics are re-estimated on the linear-probe data while only the head is meant to change.

source: https://github.com/open-mmlab/mmselfsup/commit/c30613dd6936f6e0de3a126b897ed42cc175e925
kind: bug
symptom: silent
verified: the backbone's weights stay fixed, but after one epoch of linear-probe training its BatchNorm running_mean moved away from the pre-trained value (backbone BN in training mode: True)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

torch.manual_seed(0)


class ResNet(nn.Module):
    """A two-stage ResNet-like backbone with mmdet's `frozen_stages` / `_freeze_stages` / `train` override."""

    def __init__(self, in_channels=3, width=8, frozen_stages=-1, norm_eval=False):
        super().__init__()
        self.frozen_stages, self.norm_eval = frozen_stages, norm_eval
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride=2, padding=1, bias=False)
        self.norm1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU())
        self.res_layers = ["layer1", "layer2"]
        self._freeze_stages()

    def _freeze_stages(self):
        if self.frozen_stages >= 0:
            self.norm1.eval()
            for m in [self.conv1, self.norm1]:
                for param in m.parameters():
                    param.requires_grad = False
        for i in range(1, self.frozen_stages + 1):
            m = getattr(self, 'layer{}'.format(i))
            m.eval()
            for param in m.parameters():
                param.requires_grad = False

    def forward(self, x):
        x = self.relu(self.norm1(self.conv1(x)))
        for layer_name in self.res_layers:
            x = getattr(self, layer_name)(x)
        return (x,)

    def train(self, mode=True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self


class Classification(nn.Module):
    def __init__(self, backbone, frozen_backbone=False, num_classes=10):
        super().__init__()
        self.backbone = ResNet(**backbone)
        if frozen_backbone:
            self.backbone.eval()  # ROOT
            for param in self.backbone.parameters():
                param.requires_grad = False
        self.head = nn.Linear(16, num_classes)

    def forward(self, img, gt_label):
        x = self.backbone(img)[-1]
        return F.cross_entropy(self.head(F.adaptive_avg_pool2d(x, 1).flatten(1)), gt_label)


model_cfg = dict(
    frozen_backbone=True,
    backbone=dict(in_channels=3, width=8),
)

model = Classification(**model_cfg)
# the "pre-trained" backbone: running statistics of the self-supervised pre-training
for m in model.backbone.modules():
    if isinstance(m, _BatchNorm):
        m.running_mean.fill_(0.5)
        m.running_var.fill_(2.0)
bn_before = model.backbone.norm1.running_mean.clone()
conv_before = model.backbone.conv1.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

for epoch in range(2):
    model.train()  # what mmcv's runner does at the start of every training epoch
    for it in range(5):
        img, gt_label = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
        loss = model(img, gt_label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

print(f"loss {loss.item():.4f}; backbone conv moved {(model.backbone.conv1.weight - conv_before).abs().max().item():.6f}; "
      f"backbone BN running_mean moved {(model.backbone.norm1.running_mean - bn_before).abs().max().item():.4f}; "
      f"backbone BN in training mode: {model.backbone.norm1.training}")
