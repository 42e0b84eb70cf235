"""pytorch-deepglr's supporting_matrix stores opt.connectivity_full = A.requires_grad_(True) and only then fills the symmetric half of the adjacency with A[p[1], p[0]] = 1: A is now a leaf that requires grad, and writing into one of its elements fails before training starts.

source: https://github.com/huyvd7/pytorch-deepglr/issues/4
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
from types import SimpleNamespace

import numpy as np
import torch


def connected_adjacency(width):
    """4-connected pixel grid (cut-down of deepglr's scipy-based helper)."""
    pairs = []
    for r in range(width):
        for c in range(width):
            i = r * width + c
            if c + 1 < width:
                pairs.append((i, i + 1))
            if r + 1 < width:
                pairs.append((i, i + width))
    return np.asarray(pairs)


def supporting_matrix(opt):
    dtype = torch.float32
    width = opt.width
    A_pair = connected_adjacency(width)
    opt.edges = A_pair.shape[0]
    I = torch.eye(width ** 2, width ** 2).type(dtype)
    A = torch.zeros(width ** 2, width ** 2).type(dtype)
    H = torch.zeros(opt.edges, width ** 2).type(dtype)
    for e, p in enumerate(A_pair):
        H[e, p[0]] = 1
        H[e, p[1]] = -1
        A[p[0], p[1]] = 1

    opt.I = I
    opt.pairs = A_pair
    opt.H = H
    opt.connectivity_full = A.requires_grad_(True)  # ROOT
    opt.connectivity_idx = torch.where(A > 0)

    for e, p in enumerate(A_pair):
        A[p[1], p[0]] = 1  # SYMPTOM


opt = SimpleNamespace(width=6)
supporting_matrix(opt)
features = torch.randn(2, opt.width ** 2, requires_grad=True)
Fs = (opt.H @ features.T) ** 2
w = torch.exp(-Fs.sum(1) / 2)
loss = (w.sum() * opt.connectivity_full).sum()
loss.backward()
print(opt.edges, features.grad.norm().item())
