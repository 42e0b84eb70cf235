"""Avalanche's EWCPlugin.before_backward after the fix: the current parameter is sliced, cur_param = cur_param[:n_units], so the penalty imp * (cur_param - saved_param)^2 depends on the model's weights and holds them near the previous experience's solution.

source: https://github.com/ContinualAI/avalanche/issues/1099
kind: lookalike
"""
from collections import defaultdict
from types import SimpleNamespace

import torch
import torch.nn as nn


class EWCPlugin:
    def __init__(self, ewc_lambda):
        self.ewc_lambda = ewc_lambda
        self.saved_params = defaultdict(list)
        self.importances = defaultdict(list)
        self.penalties = []

    def before_backward(self, strategy, **kwargs):
        exp_counter = strategy.clock.train_exp_counter
        if exp_counter == 0:
            return
        penalty = torch.tensor(0).float()
        for experience in range(exp_counter):
            for (_, cur_param), (_, saved_param), (_, imp) in zip(
                strategy.model.named_parameters(), self.saved_params[experience], self.importances[experience]
            ):
                n_units = saved_param.shape[0]
                cur_param = cur_param[:n_units]
                penalty += (imp * (cur_param - saved_param).pow(2)).sum()
        self.penalties.append((penalty.item(), penalty.requires_grad))
        strategy.loss += self.ewc_lambda * penalty

    def after_training_exp(self, strategy, x, y, **kwargs):
        exp_counter = strategy.clock.train_exp_counter
        strategy.model.zero_grad()
        nn.functional.cross_entropy(strategy.model(x), y).backward()
        self.importances[exp_counter] = [(k, p.grad.detach().clone().pow(2)) for k, p in strategy.model.named_parameters()]
        self.saved_params[exp_counter] = [(k, p.detach().clone()) for k, p in strategy.model.named_parameters()]


def train_experience(strategy, plugin, x, y, steps=30):
    for _ in range(steps):
        strategy.optimizer.zero_grad()
        strategy.loss = nn.functional.cross_entropy(strategy.model(x), y)
        plugin.before_backward(strategy)
        strategy.loss.backward()
        strategy.optimizer.step()
    plugin.after_training_exp(strategy, x, y)
    strategy.clock.train_exp_counter += 1


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
strategy = SimpleNamespace(model=model, optimizer=torch.optim.Adam(model.parameters(), lr=0.01),
                           clock=SimpleNamespace(train_exp_counter=0), loss=None)
plugin = EWCPlugin(ewc_lambda=1e5)
experiences = [(torch.randn(64, 8) + 1.0, torch.randint(0, 2, (64,))), (torch.randn(64, 8) - 1.0, torch.randint(2, 4, (64,)))]
train_experience(strategy, plugin, *experiences[0])
first_solution = [p.detach().clone() for p in model.parameters()]
train_experience(strategy, plugin, *experiences[1])
drift = torch.sqrt(sum(((p - q) ** 2).sum() for p, q in zip(model.parameters(), first_solution)))
print("penalties (first, last)", plugin.penalties[0], plugin.penalties[-1], "drift", drift.item())
