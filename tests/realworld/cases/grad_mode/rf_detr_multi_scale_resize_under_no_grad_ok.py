"""RF-DETR's multi-scale resize after the pull request: the batch is resized under torch.no_grad(), which yields ordinary tensors that the backbone can save for backward, so multi-scale training runs.

source: https://github.com/roboflow/rf-detr/pull/559
kind: lookalike
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class LWDETR(nn.Module):
    """Cut-down detector: conv backbone, pooled features, box and class heads."""

    def __init__(self, num_classes=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.class_embed = nn.Linear(16, num_classes)
        self.bbox_embed = nn.Linear(16, 4)

    def forward(self, samples):
        feat = self.backbone(samples).mean((2, 3))
        return {'pred_logits': self.class_embed(feat), 'pred_boxes': self.bbox_embed(feat).sigmoid()}


def train_one_epoch(model, optimizer, batches, multi_scale=True, scales=(24, 32, 40)):
    model.train()
    for it, (samples, targets) in enumerate(batches):
        if multi_scale:
            random.seed(it)
            scale = random.choice(scales)
            with torch.no_grad():
                samples = F.interpolate(samples, size=scale, mode='bilinear', align_corners=False)
        outputs = model(samples)
        loss = F.cross_entropy(outputs['pred_logits'], targets['labels']) + \
            F.l1_loss(outputs['pred_boxes'], targets['boxes'])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


torch.manual_seed(0)
model = LWDETR()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
batches = [(torch.randn(4, 3, 32, 32), {'labels': torch.randint(0, 4, (4,)), 'boxes': torch.rand(4, 4)})
           for _ in range(3)]
print(train_one_epoch(model, optimizer, batches))
