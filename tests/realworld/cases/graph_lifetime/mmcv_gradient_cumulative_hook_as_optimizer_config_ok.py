"""The maintainers' answer: GradientCumulativeOptimizerHook is given as optimizer_config (type=...), so it replaces the default OptimizerHook instead of running after it, and each iteration's loss is backpropagated once (the step every cumulative_iters iterations).

source: https://github.com/open-mmlab/mmcv/issues/1379
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OptimizerHook:
    priority = 10  # HIGH

    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        runner.outputs["loss"].backward()
        runner.optimizer.step()


class GradientCumulativeOptimizerHook(OptimizerHook):
    priority = 50  # NORMAL

    def __init__(self, cumulative_iters=1):
        self.cumulative_iters = cumulative_iters

    def after_train_iter(self, runner):
        loss = runner.outputs["loss"] / self.cumulative_iters
        loss.backward()
        if (runner.iter + 1) % self.cumulative_iters == 0:
            runner.optimizer.step()
            runner.optimizer.zero_grad()


HOOKS = {"OptimizerHook": OptimizerHook, "GradientCumulativeOptimizerHook": GradientCumulativeOptimizerHook}


def build_hook(cfg):
    cfg = dict(cfg)
    return HOOKS[cfg.pop("type")](**cfg)


class EpochBasedRunner:
    def __init__(self, model, optimizer):
        self.model, self.optimizer, self.hooks, self.iter = model, optimizer, [], 0

    def register_hook(self, hook):
        self.hooks.append(hook)
        self.hooks.sort(key=lambda h: h.priority)

    def register_training_hooks(self, optimizer_config, custom_hooks_config=()):
        self.register_hook(build_hook(dict(type="OptimizerHook", **optimizer_config))
                           if "type" not in optimizer_config else build_hook(optimizer_config))
        for cfg in custom_hooks_config:
            self.register_hook(build_hook(cfg))

    def train(self, data_loader):
        for data_batch in data_loader:
            x, y = data_batch
            self.outputs = {"loss": F.cross_entropy(self.model(x), y)}
            for hook in self.hooks:
                hook.after_train_iter(self)
            self.iter += 1


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
optimizer_config = dict(type="GradientCumulativeOptimizerHook", cumulative_iters=4, grad_clip=None)
custom_hooks = []
runner = EpochBasedRunner(model, optimizer)
runner.register_training_hooks({k: v for k, v in optimizer_config.items() if k != "grad_clip"}, custom_hooks)
data_loader = [(torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2,))) for _ in range(8)]
runner.train(data_loader)
print("iterations", runner.iter)
