"""Freezing the meta block of a MAML clone fails: the cloned parameters are not leaves.

source: https://github.com/learnables/learn2learn/issues/271
kind: bug
symptom: crash
verified: RuntimeError: you can only change requires_grad flags of leaf variables.
"""
import copy
import torch
import torch.nn as nn


def clone_module(module):
    clone = copy.deepcopy(module)
    for mod, orig in zip(clone.modules(), module.modules()):
        for name, p in orig._parameters.items():
            if p is not None:
                mod._parameters[name] = p.clone()
    return clone


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.meta_block = nn.Linear(4, 4)
        self.tail = nn.Linear(4, 4)

    def forward(self, x):
        return self.tail(torch.relu(self.meta_block(x)))


torch.manual_seed(0)
maml = Net()
opt = torch.optim.Adam(maml.parameters(), lr=1e-3)
low_res, gt = torch.randn(8, 4), torch.randn(8, 4)
opt.zero_grad()
task_model = clone_module(maml)
for name, p in task_model.meta_block.named_parameters():
    p.requires_grad = False  # ROOT
adaptation_loss = nn.functional.l1_loss(task_model(low_res), gt)
adaptation_loss.backward()
opt.step()
