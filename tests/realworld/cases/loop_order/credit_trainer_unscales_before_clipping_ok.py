"""NCAR CREDIT trainer with the PR's fix: scaler.unscale_(self.optimizer) runs before clip_grad_norm_, so the threshold applies to the true gradients, and scaler.step does not unscale them a second time.

source: https://github.com/NCAR/miles-credit/pull/141
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, optimizer, grad_max_norm=1.0):
        self.model = model
        self.optimizer = optimizer
        self.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
        self.grad_max_norm = grad_max_norm
        self.stepped_norms = []

    def train_one_epoch(self, loader):
        self.model.train()
        for x, y in loader:
            self.optimizer.zero_grad()
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                y_pred = self.model(x)
            loss = F.mse_loss(y_pred.float(), y)
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            if self.grad_max_norm > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=self.grad_max_norm)
            norm = torch.norm(torch.stack([p.grad.norm() for p in self.model.parameters()]))
            self.stepped_norms.append(norm.item())
            self.scaler.step(self.optimizer)
            self.scaler.update()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
trainer = Trainer(model, optimizer)
loader = [(torch.randn(8, 16), torch.randn(8, 16) * 3) for _ in range(3)]
trainer.train_one_epoch(loader)
print(trainer.stepped_norms)
