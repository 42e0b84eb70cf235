"""lufficc/SSD's do_train steps the warm-up/multi-step LR scheduler at the top of each iteration, before optimizer.step(), so the first iteration already uses the second warm-up factor and every milestone takes effect one iteration early (the PyTorch >= 1.1 warning the PR fixes).

source: https://github.com/lufficc/SSD/pull/98
kind: bug
symptom: silent
verified: with lr 1e-3, warmup_factor 1/3 over 4 iterations and a milestone at 6, the 8 optimizer steps use lr 0.0005, 0.000667, 0.000833, 0.001, 0.001, 0.0001, 0.0001, 0.0001; with the scheduler stepped after the optimizer they use 0.000333, 0.0005, 0.000667, 0.000833, 0.001, 0.001, 0.0001, 0.0001
"""
import bisect

import torch
import torch.nn as nn
import torch.nn.functional as F


class WarmupMultiStepLR(torch.optim.lr_scheduler.LambdaLR):
    def __init__(self, optimizer, milestones, gamma=0.1, warmup_factor=1.0 / 3, warmup_iters=4):
        def lr_lambda(it):
            warmup = 1.0
            if it < warmup_iters:
                alpha = it / warmup_iters
                warmup = warmup_factor * (1 - alpha) + alpha
            return warmup * gamma ** bisect.bisect_right(milestones, it)
        super().__init__(optimizer, lr_lambda)


class SSDDetector(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU())
        self.cls_headers = nn.Conv2d(16, 4 * num_classes, 3, padding=1)
        self.reg_headers = nn.Conv2d(16, 4 * 4, 3, padding=1)

    def forward(self, images):
        feat = self.backbone(images)
        return self.cls_headers(feat), self.reg_headers(feat)


def do_train(model, data_loader, optimizer, scheduler):
    model.train()
    for iteration, (images, cls_targets, box_targets) in enumerate(data_loader):
        scheduler.step()  # ROOT
        cls_logits, bbox_pred = model(images)
        loss = F.cross_entropy(cls_logits.view(-1, 5), cls_targets.view(-1)) + F.smooth_l1_loss(bbox_pred, box_targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
model = SSDDetector()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4)
scheduler = WarmupMultiStepLR(optimizer, milestones=[6])
data_loader = [(torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2, 4, 8, 8)), torch.randn(2, 16, 8, 8))
               for _ in range(8)]
do_train(model, data_loader, optimizer, scheduler)
