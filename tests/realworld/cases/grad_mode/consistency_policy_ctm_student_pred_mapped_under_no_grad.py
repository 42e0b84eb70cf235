"""Consistency Policy CTM student: the student prediction is mapped to the start time by the EMA model inside `with torch.no_grad():`, so the CTM loss has no graph and only the DSM term trains the student.

source: https://github.com/Aaditya-Prasad/consistency-policy/issues/4
kind: bug
symptom: silent
verified: the student's gradient is identical with losses["ctm"] = 1 and = 0 (the CTM term never reaches the model)
"""
import copy

import torch
import torch.nn as nn


class ConditionalUnet1D(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 2, 32), nn.Mish(), nn.Linear(32, dim))

    def forward(self, x, t, s):
        return self.net(torch.cat([x, t[:, None], s[:, None]], dim=-1))


def Huber_Loss(pred, target, delta=0.0, weights=None):
    loss = torch.sqrt((pred - target) ** 2 + delta ** 2) - delta
    return (loss.mean(dim=-1) * weights).mean()


class CTMPPUnetHybridImagePolicy(nn.Module):
    def __init__(self, losses):
        super().__init__()
        self.model = ConditionalUnet1D()
        self.model_ema = copy.deepcopy(self.model).requires_grad_(False)
        self.losses = losses
        self.delta = 0.0
        self.time_min = 0.002

    def _forward(self, model, x, times, stops):
        return x + (stops - times)[:, None] * model(x, times, stops)

    def compute_loss(self, trajectory):
        noise = torch.randn_like(trajectory)
        times = torch.rand(trajectory.shape[0]) * 0.8 + 0.2
        stops = times * torch.rand(trajectory.shape[0])
        u_times = stops + (times - stops) * 0.5
        weights = torch.ones(trajectory.shape[0])
        noise_traj = trajectory + times[:, None] * noise
        u_noise_traj = trajectory + u_times[:, None] * noise
        total_loss = {}

        # t -> s
        pred = self._forward(self.model, noise_traj, times, stops)

        # u -> s
        with torch.no_grad():
            target = self._forward(self.model_ema, u_noise_traj, u_times, stops)

        with torch.no_grad():
            start = torch.tensor([self.time_min]).expand(times.shape)
            pred = self._forward(self.model_ema, pred, stops, start)  # ROOT
            target = self._forward(self.model_ema, target, stops, start)

        loss = Huber_Loss(pred, target, delta=self.delta, weights=weights)
        total_loss["ctm"] = loss * self.losses["ctm"]

        dsm_pred = self._forward(self.model, noise_traj, times, torch.zeros_like(times))
        total_loss["dsm"] = ((dsm_pred - trajectory) ** 2).mean() * self.losses["dsm"]
        return sum(total_loss.values())


torch.manual_seed(0)
policy = CTMPPUnetHybridImagePolicy(losses={"ctm": 1.0, "dsm": 1.0})
optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-4)
for step in range(3):
    loss = policy.compute_loss(torch.randn(8, 4))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
