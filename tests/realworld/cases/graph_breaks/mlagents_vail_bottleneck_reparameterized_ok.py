"""ml-agents' GAIL discriminator with VAIL after PR 5546: the bottleneck is sampled as z_mu + torch.randn_like(z_mu) * self._z_sigma * use_vail_noise (the reparameterization trick), so the discriminator loss trains the encoder, the z_mu layer and the learned sigma.

source: https://github.com/Unity-Technologies/ml-agents/pull/5546
kind: lookalike
"""
import torch
import torch.nn as nn


class DiscriminatorNetwork(nn.Module):
    EPSILON = 1e-7

    def __init__(self, obs_size=6, encoding_size=16, z_size=8, use_vail=True):
        super().__init__()
        self.use_vail, self.z_size = use_vail, z_size
        self.mutual_information, self.alpha, self.initial_beta = 0.5, 0.0005, 0.0
        self.encoder = nn.Sequential(nn.Linear(obs_size, encoding_size), nn.SiLU())
        estimator_input_size = encoding_size
        if use_vail:
            estimator_input_size = self.z_size
            self._z_sigma = nn.Parameter(torch.ones((self.z_size), dtype=torch.float), requires_grad=True)
            self._z_mu_layer = nn.Linear(encoding_size, self.z_size)
            self._beta = nn.Parameter(torch.tensor(self.initial_beta, dtype=torch.float), requires_grad=False)
        self._estimator = nn.Sequential(nn.Linear(estimator_input_size, 1), nn.Sigmoid())

    def compute_estimate(self, obs, use_vail_noise=False):
        hidden = self.encoder(obs)
        z_mu = None
        if self.use_vail:
            z_mu = self._z_mu_layer(hidden)
            hidden = z_mu + torch.randn_like(z_mu) * self._z_sigma * use_vail_noise
        estimate = self._estimator(hidden)
        return estimate, z_mu

    def compute_loss(self, policy_obs, expert_obs):
        policy_estimate, policy_mu = self.compute_estimate(policy_obs, use_vail_noise=True)
        expert_estimate, expert_mu = self.compute_estimate(expert_obs, use_vail_noise=True)
        discriminator_loss = -(torch.log(expert_estimate + self.EPSILON)
                               + torch.log(1.0 - policy_estimate + self.EPSILON)).mean()
        total_loss = discriminator_loss
        if self.use_vail:
            kl_loss = torch.mean(-torch.sum(1 + (self._z_sigma ** 2).log() - 0.5 * expert_mu ** 2
                                            - 0.5 * policy_mu ** 2 - (self._z_sigma ** 2), dim=1))
            vail_loss = self._beta * (kl_loss - self.mutual_information)
            with torch.no_grad():
                self._beta.data = torch.max(self._beta + self.alpha * (kl_loss - self.mutual_information),
                                            torch.tensor(0.0))
            total_loss = total_loss + vail_loss
        return total_loss, discriminator_loss


torch.manual_seed(0)
disc = DiscriminatorNetwork()
policy_obs, expert_obs = torch.randn(32, 6), torch.randn(32, 6) + 1.0
total_loss, discriminator_loss = disc.compute_loss(policy_obs, expert_obs)
names = ["_z_mu_layer.weight", "encoder.0.weight", "_z_sigma", "_estimator.0.weight"]
params = dict(disc.named_parameters())
grads = torch.autograd.grad(discriminator_loss, [params[n] for n in names], retain_graph=True)
for n, g in zip(names, grads):
    print(n, "GAIL-loss grad", round(g.norm().item(), 4))
optimizer = torch.optim.Adam(disc.parameters(), lr=3e-4)
optimizer.zero_grad()
total_loss.backward()
optimizer.step()
