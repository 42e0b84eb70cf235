"""catalyst TemporalAttentionPooling (the LAMA actor's history pooling): the 1x1 Conv1d gives one attention logit per history step, a [bs, 1, history_len] tensor, and nn.Softmax(dim=1) normalizes over that single channel, so every step gets weight 1 and the attention convolution never gets a gradient.

source: https://github.com/catalyst-team/catalyst/pull/285
kind: bug
symptom: silent
verified: the attention weights of all 4 history steps are 1.0 and after backward the attention Conv1d weight has a zero gradient (max abs 0.0); with nn.Softmax(dim=2) they sum to 1 over the steps and the Conv1d gets a gradient (max abs 0.014)
"""
import torch
import torch.nn as nn


class TemporalAttentionPooling(nn.Module):
    def __init__(self, features_in):
        super().__init__()
        self.features_in = features_in
        self.attention_pooling = nn.Sequential(
            nn.Conv1d(in_channels=features_in, out_channels=1, kernel_size=1),
            nn.Softmax(dim=1))  # ROOT

    def forward(self, features):
        x = features.transpose(1, 2)
        weights = self.attention_pooling(x)
        x = (x * weights).sum(dim=-1)
        return x, weights


class LamaActor(nn.Module):
    def __init__(self, observation_dim=6, hidden=16, action_dim=2):
        super().__init__()
        self.observation_net = nn.Sequential(nn.Linear(observation_dim, hidden), nn.ReLU())
        self.attn = TemporalAttentionPooling(hidden)
        self.head = nn.Linear(hidden, action_dim)

    def forward(self, states):
        features = self.observation_net(states)
        pooled, weights = self.attn(features)
        return torch.tanh(self.head(pooled)), weights


torch.manual_seed(0)
actor = LamaActor()
optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
states = torch.randn(8, 4, 6)
actions, weights = actor(states)
loss = -(actions * torch.randn_like(actions)).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(weights[0], actor.attn.attention_pooling[0].weight.grad.abs().max().item())
