"""The same loop-written batched matrix product accumulating into a plain torch.zeros result (no requires_grad): the in-place element writes record the products of ma and mb in the graph, so ma.grad equals the gradient of ma @ mb.

source: https://github.com/pytorch/pytorch/issues/53348
kind: lookalike
verified: ma.grad equals the gradient of (ma @ mb).sum() (max abs difference below 1e-6)
"""
import torch

torch.manual_seed(0)
ma = torch.randn(2, 3, 3, 4).requires_grad_(True)
mb = torch.randn(2, 3, 4, 5).requires_grad_(True)
B, C, H, W = ma.shape
B, C, W, K = mb.shape
res_torch = torch.zeros((B, C, H, K))
for b in range(B):
    for c in range(C):
        for h in range(H):
            for k in range(K):
                for r in range(W):
                    res_torch[b][c][h][k] = res_torch[b][c][h][k] + ma[b][c][h][r] * mb[b][c][r][k]
res_torch.sum().backward()
ref = torch.autograd.grad((ma @ mb).sum(), ma)[0]
print((ma.grad - ref).abs().max().item())
