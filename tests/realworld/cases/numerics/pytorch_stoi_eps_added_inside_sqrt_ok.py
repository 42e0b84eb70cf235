"""pytorch_stoi after the fix: the row normalization adds EPS inside the square root (sqrt(sum(x^2) + EPS)) rather than after it, so silent (all-zero) segments give finite gradients.

source: https://github.com/mpariente/pytorch_stoi/pull/14
kind: lookalike
verified: the gradient with respect to an estimate containing an all-zero segment is finite
"""
import torch

EPS = 1e-8


def row_col_normalize(x):
    x_normed = x - torch.mean(x, dim=-1, keepdim=True)
    x_inv = 1. / torch.sqrt(torch.sum(x_normed ** 2, dim=-1, keepdim=True) + EPS)
    x_normed = x_normed * x_inv
    x_normed = x_normed - torch.mean(x_normed, dim=-2, keepdim=True)
    x_inv = 1. / torch.sqrt(torch.sum(x_normed ** 2, dim=-2, keepdim=True) + EPS)
    return x_normed * x_inv


class NegSTOILoss(torch.nn.Module):
    def forward(self, est_targets, targets):
        est = row_col_normalize(est_targets.unfold(-1, 8, 4))
        ref = row_col_normalize(targets.unfold(-1, 8, 4))
        return -torch.mean(torch.sum(est * ref, dim=-1))


torch.manual_seed(0)
separator = torch.nn.Conv1d(1, 1, 5, padding=2)
mixture, clean = torch.randn(2, 1, 64), torch.randn(2, 1, 64)
est = separator(mixture)
est = torch.cat([est[..., :32], torch.zeros_like(est[..., 32:])], dim=-1)  # a silent tail
loss = NegSTOILoss()(est, clean)
loss.backward()
print(all(torch.isfinite(p.grad).all() for p in separator.parameters()))
