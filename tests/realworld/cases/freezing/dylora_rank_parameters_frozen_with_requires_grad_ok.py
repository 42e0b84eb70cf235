"""sd-scripts' DyLoRA after commit 9ff32fd ("fix parameters are not freezed") keeps one Parameter per rank in a ParameterList and sets requires_grad=False on the ranks not trained at a step: their grads stay None after zero_grad(set_to_none=True), so AdamW skips them and only the trained rank moves.

source: https://github.com/kohya-ss/sd-scripts/commit/9ff32fd4c01668749058e1b7f2f2a87b3a5e6ca0
kind: lookalike
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
        self.lora_A = nn.ParameterList([org_module.weight.new_zeros((1, in_dim)) for _ in range(self.lora_dim)])
        self.lora_B = nn.ParameterList([org_module.weight.new_zeros((out_dim, 1)) for _ in range(self.lora_dim)])
        for lora in self.lora_A:
            torch.nn.init.kaiming_uniform_(lora, a=math.sqrt(5))
        for lora in self.lora_B:
            torch.nn.init.normal_(lora, std=0.01)  # zeros in the original; nonzero here so every rank has a gradient
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
        for i in range(0, trainable_rank):
            self.lora_A[i].requires_grad = False
            self.lora_B[i].requires_grad = False
        for i in range(trainable_rank, trainable_rank + self.unit):
            self.lora_A[i].requires_grad = True
            self.lora_B[i].requires_grad = True
        for i in range(trainable_rank + self.unit, self.lora_dim):
            self.lora_A[i].requires_grad = False
            self.lora_B[i].requires_grad = False
        lora_A = torch.cat(tuple(self.lora_A), dim=0)
        lora_B = torch.cat(tuple(self.lora_B), dim=1)
        ab = torch.nn.functional.linear(torch.nn.functional.linear(x, lora_A), lora_B)
        return result + ab * self.scale * math.sqrt(self.lora_dim / (trainable_rank + self.unit))

    def rank_rows(self):  # measurement: (lora_A row, lora_B column) of every rank
        return [torch.cat([self.lora_A[i].flatten(), self.lora_B[i].flatten()]).detach().clone() for i in range(self.lora_dim)]


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
