"""OFT: a line left in compute_loss from a test makes total_loss the score loss only; the other heads never train.

source: https://github.com/tom-roddick/oft/issues/6
kind: bug
symptom: silent
verified: position/dimension/angle loss never decrease; pos_head.weight.grad is None after backward
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OftNet(nn.Module):
    def __init__(self, num_classes=1):
        super().__init__()
        self.topdown = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
        self.score_head = nn.Conv2d(8, num_classes, 1)
        self.pos_head = nn.Conv2d(8, num_classes * 3, 1)
        self.dim_head = nn.Conv2d(8, num_classes * 3, 1)
        self.ang_head = nn.Conv2d(8, num_classes * 2, 1)

    def forward(self, ortho):
        td = self.topdown(ortho)
        return self.score_head(td), self.pos_head(td), self.dim_head(td), self.ang_head(td)


def masked_l1_loss(input, target, mask):
    return (F.l1_loss(input, target, reduction='none') * mask.float()).sum() / mask.sum().clamp(min=1)


def compute_loss(pred_encoded, gt_encoded, loss_weights=[1., 1., 1., 1.]):
    score, pos_offsets, dim_offsets, ang_offsets = pred_encoded
    heatmaps, gt_pos_offsets, gt_dim_offsets, gt_ang_offsets, mask = gt_encoded
    score_weight, pos_weight, dim_weight, ang_weight = loss_weights
    score_loss = F.binary_cross_entropy_with_logits(score, heatmaps)
    pos_loss = masked_l1_loss(pos_offsets, gt_pos_offsets, mask)
    dim_loss = masked_l1_loss(dim_offsets, gt_dim_offsets, mask)
    ang_loss = masked_l1_loss(ang_offsets, gt_ang_offsets, mask)
    total_loss = score_loss * score_weight + pos_loss * pos_weight \
        + dim_loss * dim_weight + ang_loss * ang_weight
    total_loss = score_loss  # ROOT
    loss_dict = {'score': float(score_loss), 'position': float(pos_loss),
                 'dimension': float(dim_loss), 'angle': float(ang_loss), 'total': float(total_loss)}
    return total_loss, loss_dict


torch.manual_seed(0)
model = OftNet()
optimizer = torch.optim.SGD(model.parameters(), 1e-2, 0.9, 1e-4)
ortho = torch.randn(2, 4, 6, 6)
gt_encoded = (torch.rand(2, 1, 6, 6), torch.randn(2, 3, 6, 6), torch.randn(2, 3, 6, 6),
              torch.randn(2, 2, 6, 6), torch.rand(2, 1, 6, 6) > 0.5)
loss, loss_dict = compute_loss(model(ortho), gt_encoded)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss_dict, "pos_head grad:", model.pos_head.weight.grad)
