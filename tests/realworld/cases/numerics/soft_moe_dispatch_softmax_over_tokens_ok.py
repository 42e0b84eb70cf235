"""soft-mixture-of-experts SoftMoE with the PR's fix: the dispatch softmax runs over dim 1, the tokens of each example, so no slot mixes tokens from different examples of the batch.

source: https://github.com/fkodom/soft-mixture-of-experts/pull/1
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class SoftMoE(nn.Module):
    def __init__(self, in_features=16, out_features=16, num_experts=4, slots_per_expert=2):
        super().__init__()
        self.num_experts = num_experts
        self.slots_per_expert = slots_per_expert
        self.phi = nn.Parameter(torch.randn(in_features, num_experts, slots_per_expert) * in_features ** -0.5)
        self.experts = nn.ModuleList([nn.Linear(in_features, out_features) for _ in range(num_experts)])

    def forward(self, x: Tensor) -> Tensor:
        # x: (batch, n, d); logits: (batch, n, num_experts, slots)
        logits = torch.einsum("bnd,des->bnes", x, self.phi)
        dispatch_weights = logits.softmax(dim=1)
        combine_weights = logits.flatten(start_dim=2).softmax(dim=-1).view_as(logits)
        x = torch.einsum("bnd,bnes->besd", x, dispatch_weights)
        x = torch.stack([expert(x[:, i]) for i, expert in enumerate(self.experts)], dim=1)
        return torch.einsum("besd,bnes->bnd", x, combine_weights)


torch.manual_seed(0)
moe = SoftMoE()
x = torch.randn(2, 8, 16)
y = moe(x)
x2 = x.clone()
x2[1] = torch.randn(8, 16)
y2 = moe(x2)
loss = F.mse_loss(y, torch.randn_like(y))
loss.backward()
print((y[0] - y2[0]).abs().max().item())
