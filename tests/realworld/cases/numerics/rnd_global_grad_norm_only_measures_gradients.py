"""random-network-distillation RNDAgent.train_model calls global_grad_norm_, a copy of clip_grad_norm_ that only computes the norm and never clips.

source: https://github.com/jcwleo/random-network-distillation-pytorch/issues/17
kind: bug
symptom: silent
verified: the gradient norm the optimizer steps on is 7.7, 7.2 and 6.8 at the 3 updates (nothing is clipped); with torch.nn.utils.clip_grad_norm_(..., 0.5) it is 0.5 each time
"""
from math import inf

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


def global_grad_norm_(parameters, norm_type=2):
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    parameters = list(filter(lambda p: p.grad is not None, parameters))
    norm_type = float(norm_type)
    if norm_type == inf:
        total_norm = max(p.grad.data.abs().max() for p in parameters)
    else:
        total_norm = 0
        for p in parameters:
            param_norm = p.grad.data.norm(norm_type)
            total_norm += param_norm.item() ** norm_type
        total_norm = total_norm ** (1. / norm_type)
    return total_norm


class RNDModel(nn.Module):
    def __init__(self, input_size, output_size=16):
        super().__init__()
        self.predictor = nn.Sequential(nn.Linear(input_size, 32), nn.ReLU(), nn.Linear(32, output_size))
        self.target = nn.Sequential(nn.Linear(input_size, 32), nn.ReLU(), nn.Linear(32, output_size))
        for p in self.target.parameters():
            p.requires_grad = False

    def forward(self, next_obs):
        return self.predictor(next_obs), self.target(next_obs)


class RNDAgent:
    def __init__(self, input_size, output_size, learning_rate=1e-4):
        self.model = nn.Sequential(nn.Linear(input_size, 32), nn.ReLU(), nn.Linear(32, output_size + 2))
        self.rnd = RNDModel(input_size)
        self.optimizer = optim.Adam(list(self.model.parameters()) + list(self.rnd.predictor.parameters()), lr=learning_rate)

    def train_model(self, s_batch, target_ext, target_int, y_batch, adv_batch, next_obs_batch):
        predict_next_state_feature, target_next_state_feature = self.rnd(next_obs_batch)
        forward_loss = F.mse_loss(predict_next_state_feature, target_next_state_feature.detach())
        out = self.model(s_batch)
        policy, value_ext, value_int = out[:, :-2], out[:, -2], out[:, -1]
        log_prob = F.log_softmax(policy, dim=-1).gather(1, y_batch.unsqueeze(1)).squeeze(1)
        actor_loss = -(log_prob * adv_batch).mean()
        critic_loss = F.mse_loss(value_ext, target_ext) + F.mse_loss(value_int, target_int)
        loss = actor_loss + 0.5 * critic_loss + forward_loss
        self.optimizer.zero_grad()
        loss.backward()
        global_grad_norm_(list(self.model.parameters()) + list(self.rnd.predictor.parameters()))  # ROOT
        self.optimizer.step()


torch.manual_seed(0)
agent = RNDAgent(input_size=10, output_size=4)
for update in range(3):
    s_batch, next_obs_batch = torch.randn(32, 10), torch.randn(32, 10)
    agent.train_model(s_batch, 10 * torch.randn(32), 10 * torch.randn(32), torch.randint(0, 4, (32,)),
                      torch.randn(32), next_obs_batch)
