"""sd-scripts' DyLoRA trains one rank of lora_A/lora_B per step and "freezes" the others by concatenating .detach()ed slices of a single nn.Parameter: the frozen rows get a zero gradient, not None, so AdamW still moves them (weight decay, and the momentum of the steps where they were trainable) and the rows that should stay fixed drift.

source: https://github.com/kohya-ss/sd-scripts/commit/9ff32fd4c01668749058e1b7f2f2a87b3a5e6ca0
kind: bug
symptom: silent
verified: the lora_A/lora_B rows of the ranks not trained at a step change by about 3e-6 at the first step (weight decay) and up to about 7e-4 at the next ones (momentum); with one Parameter per rank and requires_grad=False on the frozen ones the change is 0.0
"""
import math
import random

import torch
from torch import nn


class DyLoRAModule(torch.nn.Module):  # the Linear path only; alpha as a float
    def __init__(self, lora_name, org_module: torch.nn.Module, multiplier=1.0, lora_dim=4, alpha=1, unit=1):
        super().__init__()
        self.lora_name = lora_name
        self.lora_dim = lora_dim
        self.unit = unit
        in_dim, out_dim = org_module.in_features, org_module.out_features
        self.scale = alpha / self.lora_dim
        self.lora_A = nn.Parameter(org_module.weight.new_zeros((self.lora_dim, in_dim)))  # ROOT
        self.lora_B = nn.Parameter(org_module.weight.new_zeros((out_dim, self.lora_dim)))
        torch.nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        torch.nn.init.normal_(self.lora_B, std=0.01)  # zeros in the original; nonzero here so every rank has a gradient
        self.multiplier = multiplier
        self.org_module = org_module

    def apply_to(self):
        self.org_forward = self.org_module.forward
        self.org_module.forward = self.forward
        del self.org_module

    def forward(self, x):
        result = self.org_forward(x)
        trainable_rank = random.randint(0, self.lora_dim - 1)
        trainable_rank = trainable_rank - trainable_rank % self.unit
        self.trainable_rank = trainable_rank  # kept to measure the frozen rows
        lora_A_nt1 = [self.lora_A[:trainable_rank].detach()] if trainable_rank > 0 else []
        lora_A_t = self.lora_A[trainable_rank: trainable_rank + self.unit]
        lora_A_nt2 = [self.lora_A[trainable_rank + self.unit:].detach()] if trainable_rank < self.lora_dim - self.unit else []
        lora_A = torch.cat(lora_A_nt1 + [lora_A_t] + lora_A_nt2, dim=0)
        lora_B_nt1 = [self.lora_B[:, :trainable_rank].detach()] if trainable_rank > 0 else []
        lora_B_t = self.lora_B[:, trainable_rank: trainable_rank + self.unit]
        lora_B_nt2 = [self.lora_B[:, trainable_rank + self.unit:].detach()] if trainable_rank < self.lora_dim - self.unit else []
        lora_B = torch.cat(lora_B_nt1 + [lora_B_t] + lora_B_nt2, dim=1)
        ab = torch.nn.functional.linear(torch.nn.functional.linear(x, lora_A), lora_B)
        return result + ab * self.scale * math.sqrt(self.lora_dim / (trainable_rank + self.unit))

    def rank_rows(self):  # measurement: (lora_A row, lora_B column) of every rank
        return [torch.cat([self.lora_A[i].flatten(), self.lora_B[:, i].flatten()]).detach().clone() for i in range(self.lora_dim)]


random.seed(0)
torch.manual_seed(0)
unet = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))  # stands for the U-Net's attention projections
unet.requires_grad_(False)
network = nn.ModuleList([DyLoRAModule(f"lora_unet_{i}", unet[i]) for i in (0, 2)])
for lora in network:
    lora.apply_to()
optimizer = torch.optim.AdamW(network.parameters(), lr=1e-3, weight_decay=1e-2)
for step in range(5):
    x, target = torch.randn(4, 8), torch.randn(4, 8)
    loss = torch.nn.functional.mse_loss(unet(x), target)
    before = [lora.rank_rows() for lora in network]
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    frozen_change = max((after - prev).abs().max().item()
                        for lora, rows in zip(network, before)
                        for i, (prev, after) in enumerate(zip(rows, lora.rank_rows())) if i != lora.trainable_rank)
    print("step", step, "largest change of a rank frozen at this step", f"{frozen_change:.2e}")
