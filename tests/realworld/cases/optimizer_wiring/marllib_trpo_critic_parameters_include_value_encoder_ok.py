"""MARLlib after "fix mlp critic parameters": `BaseMLP.critic_parameters()` concatenates the parameters of both critic parts, `[self.vf_branch, self.vf_encoder]`, so the trust-region updater's hand-written critic step (gradient by `autograd.grad`, write-back by `vector_to_parameters`) updates the value encoder with the value head.

source: https://github.com/Replicable-MARL/MARLlib/commit/a39271450c0ae9375176a591630b12c2ef337210
kind: lookalike
"""
from functools import reduce

import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

torch.manual_seed(0)


class BaseEncoder(nn.Module):
    def __init__(self, obs_dim, hidden=(32, 32)):
        super().__init__()
        layers, last = [], obs_dim
        for h in hidden:
            layers += [nn.Linear(last, h), nn.Tanh()]
            last = h
        self.encoder = nn.Sequential(*layers)
        self.output_dim = last

    def forward(self, x):
        return self.encoder(x)


class BaseMLP(nn.Module):
    def __init__(self, obs_dim, num_outputs):
        super().__init__()
        self.p_encoder = BaseEncoder(obs_dim)
        self.vf_encoder = BaseEncoder(obs_dim)
        self.p_branch = nn.Linear(self.p_encoder.output_dim, num_outputs)
        self.vf_branch = nn.Linear(self.vf_encoder.output_dim, 1)
        self._features = None
        self.actors = [self.p_encoder, self.p_branch]
        self.actor_initialized_parameters = self.actor_parameters()

    def forward(self, obs):
        self.inputs = obs
        self._features = self.p_encoder(obs)
        return self.p_branch(self._features)

    def value_function(self):
        assert self._features is not None, "must call forward() first"
        return torch.reshape(self.vf_branch(self.vf_encoder(self.inputs)), [-1])

    def actor_parameters(self):
        return reduce(lambda x, y: x + y, map(lambda p: list(p.parameters()), self.actors))

    def critic_parameters(self):
        critics = [self.vf_branch, self.vf_encoder]
        return reduce(lambda x, y: x + y, map(lambda p: list(p.parameters()), critics))


def flat_grad(grads):
    return torch.cat([g.reshape(-1) for g in grads if g is not None])


class TrustRegionUpdator:
    critic_lr = 5e-3

    def __init__(self, model, initialize_critic_loss):
        self.model = model
        self.initialize_critic_loss = initialize_critic_loss

    @property
    def critic_parameters(self):
        return self.model.critic_parameters()

    def update(self, update_critic=True):
        if update_critic:
            self.update_critic(self.initialize_critic_loss)

    def update_critic(self, critic_loss):
        critic_loss_grad = torch.autograd.grad(critic_loss, self.critic_parameters, allow_unused=True)
        new_params = parameters_to_vector(self.critic_parameters) - flat_grad(
            critic_loss_grad) * TrustRegionUpdator.critic_lr
        vector_to_parameters(new_params, self.critic_parameters)


model = BaseMLP(obs_dim=8, num_outputs=4)
encoder_before = [p.detach().clone() for p in model.vf_encoder.parameters()]
branch_before = model.vf_branch.weight.detach().clone()
for it in range(30):
    obs = torch.randn(64, 8)
    value_targets = obs[:, :2].sum(-1)
    model(obs)
    critic_loss = ((model.value_function() - value_targets) ** 2).mean()
    TrustRegionUpdator(model, critic_loss).update(update_critic=True)
    if it % 10 == 0:
        print(f"iter {it}: critic loss {critic_loss.item():.4f}")
changed = any(not torch.equal(b, p) for b, p in zip(encoder_before, model.vf_encoder.parameters()))
print(f"vf_encoder changed: {changed}, vf_branch changed: {not torch.equal(branch_before, model.vf_branch.weight)}")
