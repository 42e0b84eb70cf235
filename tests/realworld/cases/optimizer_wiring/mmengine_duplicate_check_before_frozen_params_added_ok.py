"""mmengine's DefaultOptimWrapperConstructor.add_params after PR #903: the bypass_duplicate check runs before a parameter that does not require grad is appended as its own param group, so a frozen module shared by two parents (conv3[0] is conv1[0]) is added once and the optimizer builds and trains the rest.

source: https://github.com/open-mmlab/mmengine/pull/903
kind: lookalike
"""
import warnings
from typing import List

import torch
from torch import nn


class DefaultOptimWrapperConstructor:  # custom_keys, dcn and dwconv rules left out
    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg=None):
        self.optim_wrapper_cfg = optim_wrapper_cfg.copy()
        self.optimizer_cfg = self.optim_wrapper_cfg.pop('optimizer')
        self.paramwise_cfg = {} if paramwise_cfg is None else paramwise_cfg
        self.base_lr = self.optimizer_cfg.get('lr', None)
        self.base_wd = self.optimizer_cfg.get('weight_decay', None)

    def _is_in(self, param_group: dict, param_group_list: list) -> bool:
        param = set(param_group['params'])
        param_set = set()
        for group in param_group_list:
            param_set.update(set(group['params']))
        return not param.isdisjoint(param_set)

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '') -> None:
        bias_lr_mult = self.paramwise_cfg.get('bias_lr_mult', None)
        norm_decay_mult = self.paramwise_cfg.get('norm_decay_mult', None)
        bypass_duplicate = self.paramwise_cfg.get('bypass_duplicate', False)
        is_norm = isinstance(module, (nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm))

        for name, param in module.named_parameters(recurse=False):
            param_group = {'params': [param]}
            if bypass_duplicate and self._is_in(param_group, params):
                warnings.warn(f'{prefix} is duplicate. It is skipped since '
                              f'bypass_duplicate={bypass_duplicate}')
                continue
            if not param.requires_grad:
                params.append(param_group)
                continue
            if name == 'bias' and not is_norm and bias_lr_mult is not None:
                param_group['lr'] = self.base_lr * bias_lr_mult
            if self.base_wd is not None and is_norm and norm_decay_mult is not None:
                param_group['weight_decay'] = self.base_wd * norm_decay_mult
            params.append(param_group)

        for child_name, child_mod in module.named_children():
            child_prefix = f'{prefix}.{child_name}' if prefix else child_name
            self.add_params(params, child_mod, prefix=child_prefix)

    def __call__(self, model: nn.Module):
        optimizer_cfg = self.optimizer_cfg.copy()
        params: List = []
        self.add_params(params, model)
        optimizer_cfg['params'] = params
        optimizer_type = optimizer_cfg.pop('type')  # OPTIMIZERS.build
        return getattr(torch.optim, optimizer_type)(**optimizer_cfg)


class ExampleDuplicateModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.param1 = nn.Parameter(torch.ones(1))
        self.conv1 = nn.Sequential(nn.Conv2d(3, 4, kernel_size=1, bias=False))
        self.conv2 = nn.Conv2d(4, 2, kernel_size=1)
        self.bn = nn.BatchNorm2d(2)
        self.sub = nn.Sequential(nn.Conv2d(2, 2, kernel_size=1), nn.GroupNorm(2, 2))
        self.conv3 = nn.Sequential(nn.Conv2d(3, 4, kernel_size=1, bias=False))
        self.conv3[0] = self.conv1[0]

    def forward(self, x):
        return self.sub(self.bn(self.conv2(self.conv1(x) + self.conv3(x)))) * self.param1


torch.manual_seed(0)
model = ExampleDuplicateModel()
model.conv1[0].requires_grad_(False)  # the shared stem is frozen
optim_wrapper_cfg = dict(optimizer=dict(type='SGD', lr=0.01, weight_decay=1e-4, momentum=0.9))
paramwise_cfg = dict(bias_lr_mult=2, norm_decay_mult=0, bypass_duplicate=True)
optim_constructor = DefaultOptimWrapperConstructor(optim_wrapper_cfg, paramwise_cfg)
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    optimizer = optim_constructor(model)
x, y = torch.randn(4, 3, 5, 5), torch.randn(4, 2, 5, 5)
for step in range(3):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, round(loss.item(), 4))
