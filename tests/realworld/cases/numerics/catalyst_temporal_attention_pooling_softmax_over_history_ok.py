"""catalyst TemporalAttentionPooling with the PR's fix: the attention logits [bs, 1, history_len] are normalized with nn.Softmax(dim=2), over the history steps, so the pooling weights differ and the attention convolution is trained.

source: https://github.com/catalyst-team/catalyst/pull/285
kind: lookalike
"""
import torch
import torch.nn as nn


class TemporalAttentionPooling(nn.Module):
    def __init__(self, features_in):
        super().__init__()
        self.features_in = features_in
        self.attention_pooling = nn.Sequential(
            nn.Conv1d(in_channels=features_in, out_channels=1, kernel_size=1),
            nn.Softmax(dim=2))

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
