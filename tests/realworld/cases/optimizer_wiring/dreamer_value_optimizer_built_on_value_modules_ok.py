"""dreamer-pytorch's optim_initialize after the pull request: value_optimizer is built from get_parameters(self.value_modules), so each of the three optimizers zeroes and steps only its own modules and the world model, the actor and the value model all train.

source: https://github.com/juliusfrost/dreamer-pytorch/pull/79
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.distributions import Normal


def get_parameters(modules):
    model_parameters = []
    for module in modules:
        model_parameters += list(module.parameters())
    return model_parameters


class FreezeParameters:
    def __init__(self, modules):
        self.modules = modules
        self.param_states = [p.requires_grad for p in get_parameters(self.modules)]

    def __enter__(self):
        for param in get_parameters(self.modules):
            param.requires_grad = False

    def __exit__(self, exc_type, exc_val, exc_tb):
        for i, param in enumerate(get_parameters(self.modules)):
            param.requires_grad = self.param_states[i]


class DenseModel(nn.Module):
    def __init__(self, feature_size, output_size, hidden_size=32):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(feature_size, hidden_size), nn.ELU(), nn.Linear(hidden_size, output_size))

    def forward(self, features):
        return Normal(self.model(features), 1.0)


class AgentModel(nn.Module):
    def __init__(self, obs_size=16, action_size=2, embed_size=32, deter_size=32):
        super().__init__()
        self.observation_encoder = nn.Linear(obs_size, embed_size)
        self.representation = nn.GRUCell(embed_size + action_size, deter_size)
        self.transition = nn.GRUCell(action_size, deter_size)
        self.observation_decoder = DenseModel(deter_size, obs_size)
        self.reward_model = DenseModel(deter_size, 1)
        self.action_decoder = nn.Sequential(nn.Linear(deter_size, 32), nn.ELU(), nn.Linear(32, action_size), nn.Tanh())
        self.value_model = DenseModel(deter_size, 1)

    def rollout_policy(self, steps, state):
        feats = []
        for _ in range(steps):
            action = self.action_decoder(state.detach())
            state = self.transition(action, state)
            feats.append(state)
        return torch.stack(feats)


class Dreamer:
    def __init__(self, model, model_lr=6e-4, value_lr=8e-5, actor_lr=8e-5, grad_clip=100.0, horizon=4, discount=0.99):
        self.model = model
        self.model_lr, self.value_lr, self.actor_lr = model_lr, value_lr, actor_lr
        self.grad_clip, self.horizon, self.discount = grad_clip, horizon, discount

    def optim_initialize(self):
        model = self.model
        self.model_modules = [model.observation_encoder,
                              model.observation_decoder,
                              model.reward_model,
                              model.representation,
                              model.transition]
        self.actor_modules = [model.action_decoder]
        self.value_modules = [model.value_model]
        self.model_optimizer = torch.optim.Adam(get_parameters(self.model_modules), lr=self.model_lr)
        self.actor_optimizer = torch.optim.Adam(get_parameters(self.actor_modules), lr=self.actor_lr)
        self.value_optimizer = torch.optim.Adam(get_parameters(self.value_modules), lr=self.value_lr)

    def loss(self, observation, action, reward):
        model = self.model
        batch_t, batch_b = observation.shape[:2]
        embed = model.observation_encoder(observation)
        state = torch.zeros(batch_b, model.representation.hidden_size)
        posts = []
        for t in range(batch_t):
            state = model.representation(torch.cat([embed[t], action[t]], -1), state)
            posts.append(state)
        feat = torch.stack(posts)
        reward_loss = -torch.mean(model.reward_model(feat).log_prob(reward))
        image_loss = -torch.mean(model.observation_decoder(feat).log_prob(observation))
        model_loss = reward_loss + image_loss

        with torch.no_grad():
            flat_post = feat.reshape(batch_t * batch_b, -1)
        imag_feat = model.rollout_policy(self.horizon, flat_post)
        with FreezeParameters(self.model_modules + self.value_modules):
            imag_reward = model.reward_model(imag_feat).mean
            value = model.value_model(imag_feat).mean
        returns = imag_reward[:-1] + self.discount * value[1:]
        actor_loss = -torch.mean(returns)

        with torch.no_grad():
            value_feat = imag_feat[:-1].detach()
            value_target = returns.detach()
        value_loss = -torch.mean(model.value_model(value_feat).log_prob(value_target))
        return model_loss, actor_loss, value_loss

    def optimize_agent(self, samples):
        model_loss, actor_loss, value_loss = self.loss(*samples)

        self.model_optimizer.zero_grad()
        model_loss.backward()
        torch.nn.utils.clip_grad_norm_(get_parameters(self.model_modules), self.grad_clip)

        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        torch.nn.utils.clip_grad_norm_(get_parameters(self.actor_modules), self.grad_clip)

        self.value_optimizer.zero_grad()
        value_loss.backward()
        torch.nn.utils.clip_grad_norm_(get_parameters(self.value_modules), self.grad_clip)

        self.model_optimizer.step()
        self.actor_optimizer.step()
        self.value_optimizer.step()
        return model_loss.item(), actor_loss.item(), value_loss.item()


torch.manual_seed(0)
model = AgentModel()
algo = Dreamer(model)
algo.optim_initialize()
snap = {name: getattr(model, name).weight_ih.detach().clone() if name == "representation"
        else next(getattr(model, name).parameters()).detach().clone()
        for name in ("representation", "value_model", "action_decoder")}
for itr in range(6):
    samples = (torch.randn(5, 4, 16), torch.rand(5, 4, 2) * 2 - 1, torch.randn(5, 4, 1))
    losses = algo.optimize_agent(samples)
print("losses", losses)
for name, before in snap.items():
    after = model.representation.weight_ih if name == "representation" else next(getattr(model, name).parameters())
    print(name, "moved", (after.detach() - before).abs().max().item())
