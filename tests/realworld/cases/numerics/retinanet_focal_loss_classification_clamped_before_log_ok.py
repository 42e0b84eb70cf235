"""pytorch-retinanet FocalLoss: the sigmoid classification scores are clamped to [1e-4, 1 - 1e-4] before torch.log, so a saturated score cannot produce log(0) (the author: "we clamp ... for numerical reasons").

source: https://github.com/yhenon/pytorch-retinanet/issues/3
kind: lookalike
verified: with logits of +-40 (sigmoid exactly 0 and 1 in float32) the loss and the gradients are finite
"""
import torch
import torch.nn as nn


class FocalLoss(nn.Module):
    def forward(self, classifications, targets, alpha=0.25, gamma=2.0):
        classification = torch.clamp(classifications, 1e-4, 1.0 - 1e-4)
        alpha_factor = torch.where(torch.eq(targets, 1.), alpha * torch.ones_like(targets),
                                   (1. - alpha) * torch.ones_like(targets))
        focal_weight = torch.where(torch.eq(targets, 1.), 1. - classification, classification)
        focal_weight = alpha_factor * torch.pow(focal_weight, gamma)
        bce = -(targets * torch.log(classification) + (1.0 - targets) * torch.log(1.0 - classification))
        cls_loss = focal_weight * bce
        return cls_loss.sum() / torch.clamp(targets.sum(), min=1.0)


torch.manual_seed(0)
head = nn.Linear(8, 3)
with torch.no_grad():
    head.bias.copy_(torch.tensor([40.0, -40.0, 0.0]))
optimizer = torch.optim.SGD(head.parameters(), lr=0.01)
features = torch.randn(16, 8)
targets = (torch.rand(16, 3) > 0.7).float()
loss = FocalLoss()(torch.sigmoid(head(features)), targets)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item(), torch.isfinite(head.weight.grad).all().item())
