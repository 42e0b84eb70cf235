"""SwiftFormer EfficientAdditiveAttnetion with the authors' fix: the [B, N, 1] scores are L2-normalized over the tokens (dim=1), so they vary per token and w_g is trained.

source: https://github.com/Amshaker/SwiftFormer/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class EfficientAdditiveAttnetion(nn.Module):
    def __init__(self, in_dims=16, token_dim=16, num_heads=1):
        super().__init__()
        self.to_query = nn.Linear(in_dims, token_dim * num_heads)
        self.to_key = nn.Linear(in_dims, token_dim * num_heads)
        self.w_g = nn.Parameter(torch.randn(token_dim * num_heads, 1))
        self.scale_factor = token_dim ** -0.5
        self.Proj = nn.Linear(token_dim * num_heads, token_dim * num_heads)
        self.final = nn.Linear(token_dim * num_heads, token_dim)

    def forward(self, x):
        query = self.to_query(x)
        key = self.to_key(x)
        query = F.normalize(query, dim=-1)
        key = F.normalize(key, dim=-1)
        query_weight = query @ self.w_g
        A = query_weight * self.scale_factor
        A = torch.nn.functional.normalize(A, dim=1)
        G = torch.sum(A * query, dim=1)
        G = G.unsqueeze(1).expand(-1, key.shape[1], -1)
        out = self.Proj(G * key) + query
        out = self.final(out)
        return out, A


torch.manual_seed(0)
attn = EfficientAdditiveAttnetion()
x = torch.randn(2, 16, 16)
out, A = attn(x)
loss = F.mse_loss(out, torch.randn_like(out))
loss.backward()
print(A.min().item(), A.max().item(), attn.w_g.grad.abs().max().item())
