"""SPiRL's SACAgent.update in the order of the fix pointed to in the thread: the policy loss is backpropagated and stepped first, then the critics are stepped (each _perform_update zeroes its own gradients, so the policy loss's contribution to the critics' .grad is discarded); the losses are computed before any step, so no backward needs a weight a step has overwritten.

source: https://github.com/clvrai/spirl/issues/15
kind: lookalike
"""
import torch
import torch.nn as nn


class AttrDict(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


class Policy(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, 2 * action_dim))

    def forward(self, obs):
        mean, log_std = self.net(obs).chunk(2, -1)
        dist = torch.distributions.Normal(mean, log_std.clamp(-5, 2).exp())
        action = dist.rsample()
        return AttrDict(action=torch.tanh(action), log_prob=dist.log_prob(action).sum(-1), dist=dist)


class Critic(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + action_dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, obs, action):
        return AttrDict(q=self.net(torch.cat([obs, action], -1)))


class SACAgent:
    def __init__(self, obs_dim=6, action_dim=2, discount_factor=0.99):
        self.policy = Policy(obs_dim, action_dim)
        self.critics = nn.ModuleList([Critic(obs_dim, action_dim) for _ in range(2)])
        self.critic_targets = nn.ModuleList([Critic(obs_dim, action_dim) for _ in range(2)])
        self.critic_targets.load_state_dict(self.critics.state_dict())
        self.policy_opt = torch.optim.Adam(self.policy.parameters(), lr=3e-4)
        self.critic_opts = [torch.optim.Adam(c.parameters(), lr=3e-4) for c in self.critics]
        self._log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_opt = torch.optim.Adam([self._log_alpha], lr=3e-4)
        self._target_entropy = -action_dim
        self.discount_factor = discount_factor

    @property
    def alpha(self):
        return self._log_alpha.exp()

    def _perform_update(self, loss, opt, network):
        opt.zero_grad()
        loss.backward()
        opt.step()

    def _compute_policy_loss(self, experience_batch, policy_output):
        q_est = torch.min(*[critic(experience_batch.observation, policy_output.action).q for critic in self.critics])
        return (-1 * q_est + self.alpha * policy_output.log_prob[:, None]).mean()

    def update(self, experience_batch):
        policy_output = self.policy(experience_batch.observation)
        alpha_loss = -1 * (self.alpha * (self._target_entropy + policy_output.log_prob).detach()).mean()
        self._perform_update(alpha_loss, self.alpha_opt, self._log_alpha)
        policy_loss = self._compute_policy_loss(experience_batch, policy_output)
        with torch.no_grad():
            policy_output_next = self.policy(experience_batch.observation_next)
            q_next = torch.min(*[t(experience_batch.observation_next, policy_output_next.action).q
                                 for t in self.critic_targets])
            value_next = (q_next - self.alpha * policy_output_next.log_prob[:, None]).squeeze(-1)
            q_target = experience_batch.reward + (1 - experience_batch.done) * self.discount_factor * value_next
        qs = [critic(experience_batch.observation, experience_batch.action).q.squeeze(-1) for critic in self.critics]
        critic_losses = [0.5 * (q - q_target).pow(2).mean() for q in qs]

        # update policy network on policy loss
        self._perform_update(policy_loss, self.policy_opt, self.policy)

        # update critic networks
        [self._perform_update(critic_loss, critic_opt, critic)
         for critic_loss, critic_opt, critic in zip(critic_losses, self.critic_opts, self.critics)]
        return AttrDict(policy_loss=policy_loss.item(), critic_loss_1=critic_losses[0].item())


torch.manual_seed(0)
agent = SACAgent()
for it in range(3):
    batch = AttrDict(observation=torch.randn(32, 6), observation_next=torch.randn(32, 6),
                     action=torch.rand(32, 2) * 2 - 1, reward=torch.randn(32), done=torch.zeros(32))
    print(agent.update(batch))
