"""Tianshou v2's AutoAlpha keeps `log_alpha` as a plain tensor and builds its optimizer from `ParameterList([self._log_alpha])`; ParameterList wraps the tensor in a new Parameter object, so the alpha loss puts its gradient on the tensor while Adam steps the wrapper, whose grad stays None: the entropy coefficient never moves from its initial value.

source: https://github.com/thu-ml/tianshou/commit/8e593e53b60f108e451ac3bf36c4fe8084ece88d
kind: bug
symptom: silent
verified: after 50 SAC updates alpha is still exactly 1.0 (0.86 with the fix); log_alpha.grad is set but the Adam-stepped Parameter has grad None
"""
import torch
from torch.nn import ParameterList


class AdamOptimizerFactory:
    def __init__(self, lr=3e-3):
        self.lr = lr

    def create_instances(self, module):
        return torch.optim.Adam(module.parameters(), lr=self.lr), None


class AutoAlpha(torch.nn.Module):
    """Entropy regularization coefficient alpha, tuned automatically."""

    def __init__(self, target_entropy, log_alpha, optim):
        super().__init__()
        self._target_entropy = target_entropy
        self._log_alpha = torch.tensor(log_alpha, requires_grad=True)
        self._optim, lr_scheduler = optim.create_instances(ParameterList([self._log_alpha]))  # ROOT
        if lr_scheduler is not None:
            raise ValueError("Learning rate schedulers are not supported")

    @property
    def value(self):
        return self._log_alpha.detach().exp().item()

    def update(self, entropy):
        entropy_deficit = self._target_entropy - entropy
        alpha_loss = -(self._log_alpha * entropy_deficit).mean()
        self._optim.zero_grad()
        alpha_loss.backward()
        self._optim.step()
        return alpha_loss.item()


class GaussianActor(torch.nn.Module):
    def __init__(self, obs_dim=4, act_dim=2):
        super().__init__()
        self.mu = torch.nn.Linear(obs_dim, act_dim)
        self.log_std = torch.nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs):
        dist = torch.distributions.Independent(torch.distributions.Normal(self.mu(obs), self.log_std.exp()), 1)
        act = dist.rsample()
        return act, dist.log_prob(act)


torch.manual_seed(0)
actor = GaussianActor()
critic = torch.nn.Linear(4 + 2, 1)
actor_optim = torch.optim.Adam(actor.parameters(), lr=1e-3)
alpha = AutoAlpha(target_entropy=-2.0, log_alpha=0.0, optim=AdamOptimizerFactory())
alpha_start = alpha.value
for step in range(50):
    obs = torch.randn(32, 4)
    act, log_prob = actor(obs)
    actor_loss = (alpha.value * log_prob - critic(torch.cat([obs, act], dim=1)).flatten()).mean()
    actor_optim.zero_grad()
    actor_loss.backward()
    actor_optim.step()
    entropy = -log_prob.detach()
    alpha.update(entropy)
print(f"alpha: start {alpha_start:.4f}, after 50 updates {alpha.value:.4f}")
print("alpha changed:", alpha.value != alpha_start)
