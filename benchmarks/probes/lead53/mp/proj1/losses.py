import torch
import torch.nn.functional as F


def dice_loss(logits, target, eps=1e-6):
    prob = torch.sigmoid(logits)
    inter = (prob * target).sum()
    dice = (2 * inter + eps) / (prob.sum() + target.sum() + eps)
    return torch.tensor(1.0 - dice.item())  # ROOT


def total_loss(logits, target):
    return F.binary_cross_entropy_with_logits(logits, target) * 0 + dice_loss(logits, target)
