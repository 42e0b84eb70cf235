"""The cautious AdamW of C-Optim with its closure run the way `torch.optim` optimizers run it: `step` stays under `@torch.no_grad()` for the parameter update but calls `closure()` inside `torch.enable_grad()`, so Lightning's `training_step` + `backward` closure builds a graph and the model trains.

source: https://github.com/kyleliang919/C-Optim/issues/1
kind: lookalike
"""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.nn import MSELoss
from torch.optim import Optimizer

torch.manual_seed(0)


class AdamW(Optimizer):
    """Cautious AdamW: only the update components whose sign agrees with the gradient are applied."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                beta1, beta2 = group["betas"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                denom = exp_avg_sq.sqrt().add_(group["eps"])
                step_size = group["lr"] * math.sqrt(1.0 - beta2 ** state["step"]) / (1.0 - beta1 ** state["step"])
                norm_grad = exp_avg / denom
                mask = (norm_grad * p.grad > 0).to(p.grad.dtype)
                mask = mask * (mask.numel() / (mask.sum() + 1))
                p.add_(norm_grad * mask, alpha=-step_size)
                if group["weight_decay"] > 0.0:
                    p.add_(p, alpha=-group["lr"] * group["weight_decay"])
        return loss


class RandomDataset(torch.utils.data.Dataset):
    def __init__(self, n=64):
        self.x = np.random.randn(n, 4).astype(np.float32)
        self.y = self.x.sum(axis=1, keepdims=True)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class LitModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)
        self.loss_fn = MSELoss()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.loss_fn(self.layer(x), y)

    def configure_optimizers(self):
        return AdamW(self.parameters(), lr=1e-2)


class Trainer:
    """The part of Lightning's automatic optimization that matters here: step(closure)."""

    def __init__(self, max_epochs=2):
        self.max_epochs = max_epochs

    def fit(self, model, dataloader):
        optimizer = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            for batch_idx, batch in enumerate(dataloader):
                result = {}

                def closure():
                    loss = model.training_step(batch, batch_idx)
                    optimizer.zero_grad()
                    loss.backward()
                    result["loss"] = loss.detach()
                    return loss

                optimizer.step(closure=closure)
            print(f"epoch {epoch}: loss {result['loss'].item():.4f}")


np.random.seed(0)
Trainer(max_epochs=2).fit(LitModel(), torch.utils.data.DataLoader(RandomDataset(), batch_size=16))
