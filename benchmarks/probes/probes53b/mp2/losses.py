import torch


def charbonnier(pred, target, eps=1e-3):
    diff = pred.data - target  # ROOT
    return torch.sqrt(diff * diff + eps * eps).mean()
