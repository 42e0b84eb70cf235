"""The trainer's optimizer_step zeroes gradients only when asked, and the LoRA loop never asks.

source: https://github.com/tenstorrent/tt-blacksmith/pull/711
kind: bug
symptom: silent
verified: lora_B.grad accumulates over every step of the run
"""
import torch
import torch.nn as nn


class LoRALinear(nn.Module):
    def __init__(self, dim, rank=2):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.base.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.randn(rank, dim) * 0.01)
        self.lora_B = nn.Parameter(torch.zeros(dim, rank))

    def forward(self, x):
        return self.base(x) + x @ self.lora_A.t() @ self.lora_B.t()


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)

    def optimizer_step(self, zero_grad=False):
        self.optimizer.step()
        if zero_grad:
            self.optimizer.zero_grad()

    def train(self, batches):
        for x, y in batches:
            loss = ((self.model(x) - y) ** 2).mean()
            loss.backward()
            self.optimizer_step()  # ROOT
            print(loss.item(), self.model.lora_B.grad.norm().item())


torch.manual_seed(0)
Trainer(LoRALinear(8)).train([(torch.randn(4, 8), torch.randn(4, 8)) for _ in range(4)])
