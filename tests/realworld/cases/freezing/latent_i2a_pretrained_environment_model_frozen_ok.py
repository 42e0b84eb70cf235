"""latent-i2a's `ModelBasedNetwork` after its fix: the imagination core is built with `require_grad=False`, so `MiniPacmanImaginationCore` sets `requires_grad = False` on the pretrained environment model and rollout policy and puts them in eval mode, and the optimizer is built only from the parameters that still require grad: the A2C updates train the rollout encoder, the model-free path and the heads, and the pretrained dynamics stay as loaded.

source: https://github.com/FlorianKlemt/pytorch-latent-i2a/commit/43abbf3a9fe6449dada8c9045e2646108e8932cb
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

NUM_ACTIONS, CHANNELS, SIZE = 5, 3, 6


class MiniPacmanEnvModel(nn.Module):
    """Predicts the next frame and the reward from a frame and an action (stands in for the pretrained model)."""

    def __init__(self, num_inputs=CHANNELS, action_space=NUM_ACTIONS):
        super().__init__()
        self.action_space = action_space
        self.conv = nn.Sequential(nn.Conv2d(num_inputs + action_space, 16, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.frame_head = nn.Conv2d(16, num_inputs, 1)
        self.reward_head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 1))

    def forward(self, state, action):
        planes = F.one_hot(action, self.action_space).float()[:, :, None, None].expand(-1, -1, *state.shape[2:])
        h = self.conv(torch.cat([state, planes], dim=1))
        return torch.sigmoid(self.frame_head(h)), self.reward_head(h)


class RolloutPolicy(nn.Module):
    def __init__(self, num_inputs=CHANNELS, action_space=NUM_ACTIONS):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(num_inputs, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(16, action_space))

    def act(self, state):
        return torch.distributions.Categorical(logits=self.net(state)).sample()


def load_pretrained(module):
    """Stands in for load_em_model / load_policy: the weights of a finished pretraining run."""
    for p in module.parameters():
        nn.init.normal_(p, std=0.1)
    return module


class ImaginationCore(nn.Module):
    def __init__(self, env_model=None, policy=None):
        super().__init__()
        self.env_model = env_model
        self.policy = policy

    def forward(self, input_state, action=None):
        if action is None:
            action = self.policy.act(input_state)
        next_state, reward = self.env_model(input_state, action)
        return next_state.detach(), reward


class MiniPacmanImaginationCore(ImaginationCore):
    def __init__(self, num_inputs, require_grad):
        super().__init__()
        self.env_model = load_pretrained(MiniPacmanEnvModel(num_inputs))
        if require_grad == False:
            for param in self.env_model.parameters():
                param.requires_grad = False
            self.env_model.eval()
        else:
            self.env_model.train()
        self.policy = load_pretrained(RolloutPolicy(num_inputs))
        if require_grad == False:
            for param in self.policy.parameters():
                param.requires_grad = False
            self.policy.eval()
        else:
            for param in self.policy.parameters():
                param.requires_grad = True
            self.policy.train()


class RolloutEncoder(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(CHANNELS, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.gru = nn.GRU(16 * 4 + 1, hidden, batch_first=True)

    def forward(self, frames, rewards):
        b, t = frames.shape[:2]
        feats = self.cnn(frames.flatten(0, 1)).view(b, t, -1)
        _, h = self.gru(torch.cat([feats, rewards], dim=-1).flip(1))
        return h[-1]


class ModelBasedNetwork(nn.Module):
    def __init__(self, number_actions, input_channels, rollout_steps=2, hidden=32):
        super().__init__()
        self.rollout_steps = rollout_steps
        self.number_actions = number_actions
        self.imagination_core = MiniPacmanImaginationCore(num_inputs=input_channels, require_grad=False)
        self.encoder = RolloutEncoder(hidden)

    def forward(self, input_state):
        results = []
        for first_action in range(self.number_actions):
            state = input_state
            action = torch.full((len(state),), first_action, dtype=torch.long)
            frames, rewards = [], []
            for _ in range(self.rollout_steps):
                state, reward = self.imagination_core(state, action)
                frames.append(state)
                rewards.append(reward)
                action = None
            results.append(self.encoder(torch.stack(frames, 1), torch.stack(rewards, 1)))
        return torch.cat(results, dim=1)


class I2A(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.model_based = ModelBasedNetwork(NUM_ACTIONS, CHANNELS, hidden=hidden)
        self.model_free = nn.Sequential(nn.Conv2d(CHANNELS, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                        nn.Flatten(), nn.Linear(64, hidden), nn.ReLU())
        self.actor = nn.Linear(hidden * (NUM_ACTIONS + 1), NUM_ACTIONS)
        self.critic = nn.Linear(hidden * (NUM_ACTIONS + 1), 1)

    def forward(self, obs):
        h = torch.cat([self.model_based(obs), self.model_free(obs)], dim=1)
        return self.critic(h), self.actor(h)


actor_critic = I2A()
param = [p for p in actor_critic.parameters() if p.requires_grad]
optimizer = torch.optim.RMSprop(param, 7e-4, eps=1e-5, alpha=0.99)

env_model = actor_critic.model_based.imagination_core.env_model
before = [p.detach().clone() for p in env_model.parameters()]
probe_state = torch.rand(8, CHANNELS, SIZE, SIZE)
probe_action = torch.randint(0, NUM_ACTIONS, (8,))
with torch.no_grad():
    probe_before = env_model(probe_state, probe_action)[1]

for update in range(8):
    obs = torch.rand(8, CHANNELS, SIZE, SIZE)
    returns = torch.randn(8, 1)
    values, logits = actor_critic(obs)
    dist = torch.distributions.Categorical(logits=logits)
    actions = dist.sample()
    advantages = returns - values
    value_loss = advantages.pow(2).mean()
    action_loss = -(advantages.detach().squeeze(1) * dist.log_prob(actions)).mean()
    optimizer.zero_grad()
    (value_loss * 0.5 + action_loss - dist.entropy().mean() * 0.01).backward()
    nn.utils.clip_grad_norm_(param, 0.5)
    optimizer.step()

change = max((p.detach() - b).abs().max().item() for p, b in zip(env_model.parameters(), before))
with torch.no_grad():
    probe_after = env_model(probe_state, probe_action)[1]
print(f"pretrained environment model: max weight change {change:.3g}, "
      f"reward prediction change on the probe batch {(probe_after - probe_before).abs().max().item():.3g}")
