"""Avalanche's LwFPlugin.penalty after the fix: only the previous model's outputs are computed under torch.no_grad(); the current multi-task model's outputs keep their graph, so the distillation loss holds head 0 near the previous experience's solution.

source: https://github.com/ContinualAI/avalanche/issues/1116
kind: lookalike
"""
import copy
from types import SimpleNamespace

import torch
import torch.nn as nn


class MultiTaskModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.classifiers = nn.ModuleDict({"0": nn.Linear(32, 4), "1": nn.Linear(32, 4)})

    def forward_single_task(self, x, task_label):
        return self.classifiers[str(task_label)](self.trunk(x))

    def forward_all_tasks(self, x):
        return {int(t): self.forward_single_task(x, t) for t in self.classifiers}


def avalanche_forward(model, x, task_labels):
    return model.forward_all_tasks(x)


class LwFPlugin:
    def __init__(self, alpha=1.0, temperature=2.0):
        self.alpha, self.temperature = alpha, temperature
        self.prev_model, self.prev_classes = None, {}
        self.penalties = []

    def _distillation_loss(self, out, prev_out, active_units):
        au = list(active_units)
        log_p = torch.log_softmax(out / self.temperature, dim=1)[:, au]
        q = torch.softmax(prev_out / self.temperature, dim=1)[:, au]
        return torch.nn.functional.kl_div(log_p, q, reduction="batchmean")

    def penalty(self, out, x, alpha, curr_model):
        if self.prev_model is None:
            return 0
        if isinstance(self.prev_model, MultiTaskModule):
            with torch.no_grad():
                y_prev = avalanche_forward(self.prev_model, x, None)
            y_curr = avalanche_forward(curr_model, x, None)
        else:
            with torch.no_grad():
                y_prev = {"0": self.prev_model(x)}
            y_curr = {"0": out}
        dist_loss = 0
        for task_id in y_prev.keys():
            if str(task_id) in self.prev_classes:
                dist_loss += self._distillation_loss(y_curr[task_id], y_prev[task_id], self.prev_classes[str(task_id)])
        return alpha * dist_loss

    def before_backward(self, strategy):
        penalty = self.penalty(strategy.mb_output, strategy.mb_x, self.alpha, strategy.model)
        if torch.is_tensor(penalty):
            self.penalties.append((penalty.item(), penalty.requires_grad))
        strategy.loss += penalty

    def after_training_exp(self, strategy, task_label, classes):
        self.prev_model = copy.deepcopy(strategy.model)
        self.prev_classes[str(task_label)] = set(classes)


def train_experience(strategy, plugin, x, y, task_label, steps=60):
    for _ in range(steps):
        strategy.mb_x = x
        strategy.mb_output = strategy.model.forward_single_task(x, task_label)
        strategy.loss = nn.functional.cross_entropy(strategy.mb_output, y)
        plugin.before_backward(strategy)
        strategy.optimizer.zero_grad()
        strategy.loss.backward()
        strategy.optimizer.step()
    plugin.after_training_exp(strategy, task_label, y.unique().tolist())


torch.manual_seed(0)
model = MultiTaskModule()
strategy = SimpleNamespace(model=model, optimizer=torch.optim.Adam(model.parameters(), lr=0.01))
plugin = LwFPlugin(alpha=10.0)
x0, y0 = torch.randn(64, 8) + 1.0, torch.randint(0, 4, (64,))
x1, y1 = torch.randn(64, 8) - 1.0, torch.randint(0, 4, (64,))
train_experience(strategy, plugin, x0, y0, task_label=0)
with torch.no_grad():
    first = torch.log_softmax(model.forward_single_task(x0, 0), 1)
train_experience(strategy, plugin, x1, y1, task_label=1)
with torch.no_grad():
    drift = nn.functional.kl_div(torch.log_softmax(model.forward_single_task(x0, 0), 1), first, log_target=True,
                                 reduction="batchmean").item()
print("last penalty (value, requires_grad)", plugin.penalties[-1], "head-0 drift", drift)
