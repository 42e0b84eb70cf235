"""SiamCAR's ModelBuilder fuses the three depthwise cross-correlation maps with self.down = nn.ConvTranspose2d(256 * 3, 256, 1, 1), but build_opt_lr in tools/train.py gives the optimizer only the backbone, the neck and the CAR head: self.down gets gradients every step and is never updated, staying at its random initialisation.

source: https://github.com/ohhhyeahhh/SiamCAR/issues/18
kind: bug
symptom: silent
verified: after 5 SGD steps the CAR head's first conv weight has changed by 0.0246 (max abs) while model.down.weight, whose gradient has norm 2.4878, has changed by 0.0; with model.down's parameters added to trainable_params (the fix) it changes by 0.0173
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

cfg = SimpleNamespace(
    ADJUST=SimpleNamespace(ADJUST=True),
    BACKBONE=SimpleNamespace(TRAIN_EPOCH=10, TRAIN_LAYERS=['layer2', 'layer3', 'layer4'], LAYERS_LR=0.1),
    TRAIN=SimpleNamespace(BASE_LR=0.005, MOMENTUM=0.9, WEIGHT_DECAY=1e-4, CLS_WEIGHT=1.0, LOC_WEIGHT=3.0,
                          CEN_WEIGHT=1.0),
)
C = 8  # 256 channels in SiamCAR


def xcorr_depthwise(x, kernel):
    batch = kernel.size(0)
    channel = kernel.size(1)
    x = x.view(1, batch * channel, x.size(2), x.size(3))
    kernel = kernel.view(batch * channel, 1, kernel.size(2), kernel.size(3))
    out = F.conv2d(x, kernel, groups=batch * channel)
    return out.view(batch, channel, out.size(2), out.size(3))


class Backbone(nn.Module):  # stands for ResNet-50 returning layer2..layer4
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(3, C, 3, padding=1), nn.ReLU())
        self.layer2 = nn.Conv2d(C, C, 3, padding=1)
        self.layer3 = nn.Conv2d(C, C, 3, padding=1)
        self.layer4 = nn.Conv2d(C, C, 3, padding=1)

    def forward(self, x):
        x1 = self.layer1(x)
        x2 = self.layer2(x1)
        x3 = self.layer3(torch.relu(x2))
        x4 = self.layer4(torch.relu(x3))
        return [x2, x3, x4]


class AdjustAllLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.downsample = nn.ModuleList(nn.Conv2d(C, C, 1) for _ in range(3))

    def forward(self, features):
        return [d(f) for d, f in zip(self.downsample, features)]


class CARHead(nn.Module):  # one conv tower instead of four
    def __init__(self, in_channels):
        super().__init__()
        self.tower = nn.Sequential(nn.Conv2d(in_channels, in_channels, 3, padding=1), nn.ReLU())
        self.cls_logits = nn.Conv2d(in_channels, 2, 3, padding=1)
        self.bbox_pred = nn.Conv2d(in_channels, 4, 3, padding=1)
        self.centerness = nn.Conv2d(in_channels, 1, 3, padding=1)

    def forward(self, x):
        t = self.tower(x)
        return self.cls_logits(t), torch.exp(self.bbox_pred(t)), self.centerness(t)


class ModelBuilder(nn.Module):
    def __init__(self):
        super(ModelBuilder, self).__init__()
        self.backbone = Backbone()
        if cfg.ADJUST.ADJUST:
            self.neck = AdjustAllLayer()
        self.car_head = CARHead(C)
        self.xcorr_depthwise = xcorr_depthwise
        self.down = nn.ConvTranspose2d(C * 3, C, 1, 1)

    def forward(self, data):  # the loss evaluator reduced to cross entropy, L1 and BCE terms
        zf = self.backbone(data['template'])
        xf = self.backbone(data['search'])
        if cfg.ADJUST.ADJUST:
            zf = self.neck(zf)
            xf = self.neck(xf)
        features = self.xcorr_depthwise(xf[0], zf[0])
        for i in range(len(xf) - 1):
            features_new = self.xcorr_depthwise(xf[i + 1], zf[i + 1])
            features = torch.cat([features, features_new], 1)
        features = self.down(features)
        cls, loc, cen = self.car_head(features)
        cls_loss = F.cross_entropy(cls, data['label_cls'])
        loc_loss = F.l1_loss(loc, data['bbox'])
        cen_loss = F.binary_cross_entropy_with_logits(cen, data['label_cen'])
        return {'total_loss': cfg.TRAIN.CLS_WEIGHT * cls_loss + cfg.TRAIN.LOC_WEIGHT * loc_loss
                + cfg.TRAIN.CEN_WEIGHT * cen_loss}


def build_opt_lr(model, current_epoch=0):
    if current_epoch >= cfg.BACKBONE.TRAIN_EPOCH:
        for layer in cfg.BACKBONE.TRAIN_LAYERS:
            for param in getattr(model.backbone, layer).parameters():
                param.requires_grad = True
    else:
        for param in model.backbone.parameters():
            param.requires_grad = False
    trainable_params = []
    trainable_params += [{'params': filter(lambda x: x.requires_grad, model.backbone.parameters()),
                          'lr': cfg.BACKBONE.LAYERS_LR * cfg.TRAIN.BASE_LR}]
    if cfg.ADJUST.ADJUST:
        trainable_params += [{'params': model.neck.parameters(), 'lr': cfg.TRAIN.BASE_LR}]
    trainable_params += [{'params': model.car_head.parameters(), 'lr': cfg.TRAIN.BASE_LR}]
    optimizer = torch.optim.SGD(trainable_params,  # ROOT
                                momentum=cfg.TRAIN.MOMENTUM,
                                weight_decay=cfg.TRAIN.WEIGHT_DECAY)
    return optimizer


torch.manual_seed(0)
model = ModelBuilder()
optimizer = build_opt_lr(model, current_epoch=0)
down_before = model.down.weight.detach().clone()
head_before = model.car_head.tower[0].weight.detach().clone()
data = {'template': torch.randn(2, 3, 7, 7), 'search': torch.randn(2, 3, 15, 15),
        'label_cls': torch.randint(0, 2, (2, 9, 9)), 'bbox': torch.rand(2, 4, 9, 9) * 4,
        'label_cen': torch.rand(2, 1, 9, 9)}
for step in range(5):
    outputs = model(data)
    optimizer.zero_grad()
    outputs['total_loss'].backward()
    optimizer.step()
print("model.down.weight grad norm:", round(model.down.weight.grad.norm().item(), 4))
print("car_head conv change:", round((model.car_head.tower[0].weight - head_before).abs().max().item(), 4),
      "model.down change:", round((model.down.weight - down_before).abs().max().item(), 4))
