"""Focal-style loss with gamma = 0: pt = torch.pow(1 - probs, 0) is detached in place with pt.detach_() before weighting the log-probabilities; pt is a constant 1 and the loss's gradient reaches the model exactly as without it.

source: https://github.com/pytorch/pytorch/issues/7462
kind: lookalike
verified: the model gradients with and without the pt weight are identical
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def focal_logmean(logits, targets, use_pt):
    P = F.softmax(logits, dim=1)
    class_mask = F.one_hot(targets, logits.shape[1]).float()
    probs = (P * class_mask).sum(1).view(-1, 1)
    if use_pt:
        pt = torch.pow(1 - probs, 0)
        pt.detach_()
        logmean = (pt * probs.log()).sum(1).view(-1, 1)
    else:
        logmean = (probs.log()).sum(1).view(-1, 1)
    return -logmean.mean()


def grads(use_pt):
    torch.manual_seed(0)
    model = nn.Linear(6, 4)
    x, y = torch.randn(5, 6), torch.randint(0, 4, (5,))
    focal_logmean(model(x), y, use_pt).backward()
    return [p.grad for p in model.parameters()]


print(all(torch.equal(a, b) for a, b in zip(grads(True), grads(False))))
