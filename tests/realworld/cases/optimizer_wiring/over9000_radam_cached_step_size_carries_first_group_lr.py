"""over9000's `RAdam.step` caches the rectified step size per step count in `self.buffer`, shared by all parameter groups, and the cached value already includes `group['lr']`: the first group to reach a step count fills the cache and every later group reuses that group's learning rate, so a fine-tuning setup with a small learning rate for the pretrained backbone and a large one for the new head moves the backbone at the head's rate.

source: https://github.com/mgrankin/over9000/commit/ffcafbc0cdc6e8062a2c1817c1b104575c4574a3
kind: bug
symptom: silent
verified: the backbone group (lr 1e-5) moves at the head group's rate (lr 1e-3): backbone drift over 20 steps 8.56e-04 against the look-alike's 8.57e-06 (backbone/head drift ratio 0.727 against 0.007)
"""
import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.optim.optimizer import Optimizer

torch.manual_seed(0)


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.buffer = [[None, None, None] for _ in range(10)]
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data.float()
                p_data_fp32 = p.data.float()
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p_data_fp32)
                    state["exp_avg_sq"] = torch.zeros_like(p_data_fp32)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                beta1, beta2 = group["betas"]
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                state["step"] += 1
                buffered = self.buffer[int(state["step"] % 10)]
                if state["step"] == buffered[0]:
                    N_sma, step_size = buffered[1], buffered[2]
                else:
                    buffered[0] = state["step"]
                    beta2_t = beta2 ** state["step"]
                    N_sma_max = 2 / (1 - beta2) - 1
                    N_sma = N_sma_max - 2 * state["step"] * beta2_t / (1 - beta2_t)
                    buffered[1] = N_sma
                    if N_sma >= 5:
                        step_size = group["lr"] * math.sqrt(  # ROOT
                            (1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (N_sma - 2) / N_sma * N_sma_max
                            / (N_sma_max - 2)) / (1 - beta1 ** state["step"])
                    else:
                        step_size = group["lr"] / (1 - beta1 ** state["step"])
                    buffered[2] = step_size
                if group["weight_decay"] != 0:
                    p_data_fp32.add_(p_data_fp32, alpha=-group["weight_decay"] * group["lr"])
                if N_sma >= 5:
                    denom = exp_avg_sq.sqrt().add_(group["eps"])
                    p_data_fp32.addcdiv_(exp_avg, denom, value=-step_size)
                else:
                    p_data_fp32.add_(exp_avg, alpha=-step_size)
                p.data.copy_(p_data_fp32)
        return loss


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        return self.head(self.backbone(x))


model = Classifier()
optimizer = RAdam([
    {"params": model.head.parameters(), "lr": 1e-3},
    {"params": model.backbone.parameters(), "lr": 1e-5},
])
backbone_start = [p.detach().clone() for p in model.backbone.parameters()]
head_start = [p.detach().clone() for p in model.head.parameters()]
x = torch.randn(256, 20)
y = torch.randint(0, 5, (256,))

for step in range(20):
    idx = torch.randint(0, 256, (32,))
    loss = F.cross_entropy(model(x[idx]), y[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def drift(params, start):
    return max((p.detach() - s).abs().max().item() for p, s in zip(params, start))


backbone_drift = drift(model.backbone.parameters(), backbone_start)
head_drift = drift(model.head.parameters(), head_start)
print(f"backbone drift {backbone_drift:.2e}, head drift {head_drift:.2e}, ratio {backbone_drift / head_drift:.3f}")
