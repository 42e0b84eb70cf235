"""OpenSpiel's PyTorch PolicyGradient as fixed after the issue: the policy update clips the gradients of the parameters its own optimizer steps (torso and policy logits).

source: https://github.com/google-deepmind/open_spiel/issues/827
kind: lookalike
verified: the gradient the policy optimizer steps on has norm 0.5 at each of the first 3 updates
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PolicyGradient:
    def __init__(self, info_state_size, num_actions, hidden_layers_sizes=(32,),
                 pi_learning_rate=0.01, critic_learning_rate=0.01, max_global_gradient_norm=0.5):
        layers, size = [], info_state_size
        for h in hidden_layers_sizes:
            layers += [nn.Linear(size, h), nn.ReLU()]
            size = h
        self._net_torso = nn.Sequential(*layers)
        self._policy_logits_layer = nn.Linear(size, num_actions)
        self._baseline_layer = nn.Linear(size, 1)
        self._max_global_gradient_norm = max_global_gradient_norm
        self._pi_optimizer = torch.optim.SGD(
            list(self._net_torso.parameters()) + list(self._policy_logits_layer.parameters()),
            lr=pi_learning_rate)
        self._critic_optimizer = torch.optim.SGD(self._baseline_layer.parameters(), lr=critic_learning_rate)

    def _critic_update(self, info_states, returns):
        torso_out = self._net_torso(info_states)
        baseline = torch.squeeze(self._baseline_layer(torso_out), dim=1)
        critic_loss = F.mse_loss(baseline, returns)
        self._critic_optimizer.zero_grad()
        critic_loss.backward()
        if self._max_global_gradient_norm is not None:
            nn.utils.clip_grad_norm_(self._baseline_layer.parameters(), self._max_global_gradient_norm)
        self._critic_optimizer.step()
        return critic_loss

    def _pi_update(self, info_states, actions, returns):
        torso_out = self._net_torso(info_states)
        logits = self._policy_logits_layer(torso_out)
        baseline = torch.squeeze(self._baseline_layer(torso_out), dim=1).detach()
        advantages = returns - baseline
        log_probs = F.log_softmax(logits, dim=-1).gather(1, actions[:, None]).squeeze(1)
        pi_loss = -(log_probs * advantages).mean()
        self._pi_optimizer.zero_grad()
        pi_loss.backward()
        if self._max_global_gradient_norm is not None:
            nn.utils.clip_grad_norm_(
                list(self._net_torso.parameters()) + list(self._policy_logits_layer.parameters()),
                self._max_global_gradient_norm)
        self._pi_optimizer.step()
        return pi_loss


torch.manual_seed(0)
agent = PolicyGradient(info_state_size=8, num_actions=4)
for step in range(3):
    info_states = torch.randn(32, 8)
    actions = torch.randint(0, 4, (32,))
    returns = torch.randn(32) * 5
    agent._critic_update(info_states, returns)
    agent._pi_update(info_states, actions, returns)
