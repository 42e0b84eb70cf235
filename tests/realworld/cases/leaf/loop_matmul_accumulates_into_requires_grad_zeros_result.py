"""Batched matrix product written as Python loops that accumulate into `res_torch = torch.zeros(..., requires_grad=True)` element by element: res_torch is a leaf that requires grad, and writing into it in place makes autograd refuse it (the report, on an older torch, got "leaf variable has been moved into the graph interior"; torch 2.13 refuses the first write).

source: https://github.com/pytorch/pytorch/issues/53348
kind: bug
symptom: crash
verified: a view of a leaf Variable that requires grad is being used in an in-place operation
"""
import torch

torch.manual_seed(0)
ma = torch.randn(2, 3, 3, 4).requires_grad_(True)
mb = torch.randn(2, 3, 4, 5).requires_grad_(True)
B, C, H, W = ma.shape
B, C, W, K = mb.shape
res_torch = torch.zeros((B, C, H, K), requires_grad=True)  # ROOT
for b in range(B):
    for c in range(C):
        for h in range(H):
            for k in range(K):
                for r in range(W):
                    res_torch[b][c][h][k] = res_torch[b][c][h][k] + ma[b][c][h][r] * mb[b][c][r][k]  # SYMPTOM
res_torch.sum().backward()
print(ma.grad)
