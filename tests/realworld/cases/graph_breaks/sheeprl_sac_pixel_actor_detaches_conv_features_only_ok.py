"""sheeprl's SAC-pixel (SAC-AE) after commit f2d0b18: the encoder itself detaches only the convolutional features (`x = x.detach()` before its fc), so the actor's own encoder fc and LayerNorm get the actor loss's gradient while the shared convolutions stay trained by the critic alone.

source: https://github.com/Eclectic-Sheep/sheeprl/commit/f2d0b18b957bd43c27946be77a58db0da168f82d
kind: lookalike
"""
import copy

import torch
import torch.nn as nn
from torch import Tensor

LOG_STD_MAX, LOG_STD_MIN = 2, -10


class Encoder(nn.Module):  # four convolutions and an fc + LayerNorm + Tanh, on 3x16x16 observations
    def __init__(self, in_channels: int, features_dim: int, screen_size: int = 16):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(in_channels, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=1), nn.ReLU())
        with torch.no_grad():
            x = self.model(torch.rand(1, in_channels, screen_size, screen_size))
            flattened_conv_output_dim = x.flatten(1).shape[1]
        self.fc = nn.Sequential(nn.Linear(flattened_conv_output_dim, features_dim), nn.LayerNorm(features_dim), nn.Tanh())
        self.output_dim = features_dim

    def forward(self, x: Tensor, detach_encoder_features: bool = False) -> Tensor:
        x = self.model(x)
        if detach_encoder_features:
            x = x.detach()
        x = self.fc(x.flatten(1))
        return x


class SACPixelCritic(nn.Module):
    def __init__(self, encoder, qfs):
        super().__init__()
        self.encoder = encoder
        self.qfs = nn.ModuleList(qfs)

    def forward(self, obs: Tensor, action: Tensor, detach_encoder_features: bool = False) -> Tensor:
        features = self.encoder(obs, detach_encoder_features)
        return torch.cat([q(torch.cat([features, action], -1)) for q in self.qfs], dim=-1)


class SACPixelContinuousActor(nn.Module):
    def __init__(self, encoder, action_dim: int, hidden_dim: int = 32):
        super().__init__()
        self.encoder = encoder
        self.model = nn.Sequential(nn.Linear(encoder.output_dim, hidden_dim), nn.ReLU())
        self.fc_mean = nn.Linear(hidden_dim, action_dim)
        self.fc_logstd = nn.Linear(hidden_dim, action_dim)

    def forward(self, obs: Tensor, detach_encoder_features: bool = False):
        features = self.encoder(obs, detach_encoder_features)
        x = self.model(features)
        mean = self.fc_mean(x)
        std = torch.clamp(self.fc_logstd(x), LOG_STD_MIN, LOG_STD_MAX).exp()
        normal = torch.distributions.Normal(mean, std)
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        log_prob = (normal.log_prob(x_t) - torch.log(1 - y_t.pow(2) + 1e-6)).sum(-1, keepdim=True)
        return y_t, log_prob


class SACPixelAgent(nn.Module):
    def __init__(self, actor, critic, alpha=0.1):
        super().__init__()
        # Tie encoder weights between actor and critic
        for actor_layer, critic_layer in zip(actor.encoder.modules(), critic.encoder.modules()):
            if isinstance(actor_layer, nn.Conv2d) and isinstance(critic_layer, nn.Conv2d):
                actor_layer.weight = critic_layer.weight
                actor_layer.bias = critic_layer.bias
        self.actor, self.critic, self.alpha = actor, critic, alpha


torch.manual_seed(0)
act_dim, features_dim = 2, 16
encoder = Encoder(3, features_dim)
actor = SACPixelContinuousActor(encoder=copy.deepcopy(encoder), action_dim=act_dim)
qfs = [nn.Sequential(nn.Linear(features_dim + act_dim, 32), nn.ReLU(), nn.Linear(32, 1)) for _ in range(2)]
critic = SACPixelCritic(encoder=encoder, qfs=qfs)
agent = SACPixelAgent(actor, critic)
qf_optimizer = torch.optim.Adam(agent.critic.parameters(), lr=1e-3)
actor_optimizer = torch.optim.Adam(agent.actor.parameters(), lr=1e-3)
actor_fc0 = actor.encoder.fc[0].weight.detach().clone()
actor_head0 = actor.fc_mean.weight.detach().clone()
for global_step in range(5):
    obs = torch.rand(8, 3, 16, 16)
    actions, rewards = torch.rand(8, act_dim) * 2 - 1, torch.randn(8, 1)
    qf_values = agent.critic(obs, actions)
    qf_loss = sum(nn.functional.mse_loss(qf_values[..., i].unsqueeze(-1), rewards) for i in range(2))
    qf_optimizer.zero_grad(set_to_none=True)
    qf_loss.backward()
    qf_optimizer.step()

    actions, logprobs = agent.actor(obs, detach_encoder_features=True)
    qf_values = agent.critic(obs, actions, detach_encoder_features=True)
    min_qf_values = torch.min(qf_values, dim=-1, keepdim=True)[0]
    actor_loss = ((agent.alpha * logprobs) - min_qf_values).mean()
    actor_optimizer.zero_grad(set_to_none=True)
    actor_loss.backward()
    actor_optimizer.step()
print("actor encoder fc moved by:", (actor.encoder.fc[0].weight.detach() - actor_fc0).abs().max().item())
print("actor fc_mean moved by:", (actor.fc_mean.weight.detach() - actor_head0).abs().max().item())
