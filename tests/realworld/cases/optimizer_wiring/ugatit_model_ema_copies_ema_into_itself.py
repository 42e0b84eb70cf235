"""enhanced-UGATIT model_ema: before the EMA starts, G_ema should follow G, but the loop does `p_ema.copy_(p_ema)` (a typo for p), so G_ema stays at its random init while G trains and the averaging later starts from a stale copy.

source: https://github.com/zheng-yuwei/enhanced-UGATIT/issues/4
kind: bug
symptom: silent
verified: after 5 warm-up iterations G_ema.0.weight is unchanged (0.0) while G moved 0.0050 (max abs); with p_ema.copy_(p) G_ema equals G (difference 0.0)
"""
import copy

import torch
import torch.nn as nn


class UGATIT(object):
    def __init__(self, ema_start=10, ema_beta=0.999):
        self.genA2B = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
        self.genA2B_ema = copy.deepcopy(self.genA2B)
        for p in self.genA2B_ema.parameters():
            p.requires_grad_(False)
        self.ema_start = ema_start
        self.ema_beta = ema_beta
        self.G_optim = torch.optim.Adam(self.genA2B.parameters(), lr=1e-3)

    @torch.no_grad()
    def model_ema(self, step, G, G_ema):
        if step >= self.ema_start:
            for p_ema, p in zip(G_ema.parameters(), G.parameters()):
                p_ema.copy_(p.lerp(p_ema, self.ema_beta))
        else:
            for p_ema, p in zip(G_ema.parameters(), G.parameters()):
                p_ema.copy_(p_ema)  # ROOT

    def train(self, iterations):
        init = self.genA2B_ema[0].weight.clone()
        for step in range(iterations):
            real_A, real_B = torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)
            G_loss = (self.genA2B(real_A) - real_B).abs().mean()
            self.G_optim.zero_grad()
            G_loss.backward()
            self.G_optim.step()
            self.model_ema(step, self.genA2B, self.genA2B_ema)
        print((self.genA2B_ema[0].weight - init).abs().max().item(),
              (self.genA2B[0].weight - init).abs().max().item(),
              (self.genA2B_ema[0].weight - self.genA2B[0].weight).abs().max().item())


torch.manual_seed(0)
UGATIT().train(5)
