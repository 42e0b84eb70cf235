"""World-model training clips gradients inside training_step, before backward() has produced them.

source: https://github.com/simchowitzlabpublic/nano-world-model/pull/22
kind: bug
symptom: silent
verified: trained weights are identical to a run without gradient clipping
"""
import torch
import torch.nn as nn


class WorldModel(nn.Module):
    def __init__(self, gradient_clip_norm=0.01):
        super().__init__()
        self.dynamics = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 6))
        self.gradient_clip_norm = gradient_clip_norm

    def training_step(self, batch):
        obs, next_obs = batch
        loss = nn.functional.mse_loss(self.dynamics(obs), next_obs)
        torch.nn.utils.clip_grad_norm_(self.parameters(), self.gradient_clip_norm)  # ROOT
        return loss


def fit(model, optimizer, batches):
    for batch in batches:
        optimizer.zero_grad()
        loss = model.training_step(batch)
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
model = WorldModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
batches = [(torch.randn(8, 6) * 5, torch.randn(8, 6) * 5) for _ in range(5)]
fit(model, optimizer, batches)
