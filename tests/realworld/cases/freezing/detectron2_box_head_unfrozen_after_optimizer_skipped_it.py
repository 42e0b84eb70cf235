"""detectron2 GeneralizedRCNN: the box head is frozen at build time and unfrozen at iteration N with requires_grad = True, but build_optimizer skipped frozen parameters, so the unfrozen head gets gradients and never changes.

source: https://github.com/facebookresearch/detectron2/issues/2486
kind: bug
symptom: silent
verified: after unfreezing, roi_heads.box_head weights have a .grad but stay identical to their initial values
"""
import logging

import torch
import torch.nn as nn

logger = logging.getLogger(__name__)


class ROIHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.box_head = nn.Sequential(nn.Flatten(), nn.Linear(8 * 4 * 4, 32), nn.ReLU())
        self.box_predictor = nn.Linear(32, 5)

    def forward(self, features):
        return self.box_predictor(self.box_head(features))


class GeneralizedRCNN(nn.Module):
    def __init__(self, freeze_box_head=True):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        self.roi_heads = ROIHeads()
        if freeze_box_head:
            for p in self.roi_heads.box_head.parameters():
                p.requires_grad = False

    def forward(self, images):
        return self.roi_heads(self.backbone(images))

    def unfreeze_box_head(self):
        for p in self.roi_heads.box_head.parameters():
            p.requires_grad = True  # ROOT
        logger.info('Unfreeze roi_box_head parameters')


def build_optimizer(model, base_lr=0.02, weight_decay=1e-4):
    params = []
    for key, value in model.named_parameters(recurse=True):
        if not value.requires_grad:
            continue
        params += [{"params": [value], "lr": base_lr, "weight_decay": weight_decay}]
    return torch.optim.SGD(params, base_lr, momentum=0.9)


torch.manual_seed(0)
model = GeneralizedRCNN()
optimizer = build_optimizer(model)
head_before = model.roi_heads.box_head[1].weight.clone()
for iteration in range(6):
    if iteration == 3:
        model.unfreeze_box_head()
    images, gt_classes = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    losses = nn.functional.cross_entropy(model(images), gt_classes)
    optimizer.zero_grad()
    losses.backward()
    optimizer.step()
