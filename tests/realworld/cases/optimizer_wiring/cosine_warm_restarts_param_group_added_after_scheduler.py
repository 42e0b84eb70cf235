"""Fine-tuning that unfreezes layer b by opt.add_param_group(...) after CosineAnnealingWarmRestarts was built on the one-group optimizer: the scheduler only knows the first group's base_lrs, and its next step fails on the added group.

source: https://github.com/pytorch/pytorch/issues/79888
kind: bug
symptom: crash
verified: ValueError: zip() argument 2 is shorter than argument 1
"""
import collections

import torch as th

th.manual_seed(0)
model = th.nn.Sequential(collections.OrderedDict(a=th.nn.Linear(4, 8), b=th.nn.Linear(8, 2)))
for p in model.b.parameters():
    p.requires_grad_(False)
opt = th.optim.Adam([dict(params=model.a.parameters(), lr=0.001)])
sched = th.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=10)

for epoch in range(4):
    if epoch == 2:
        for p in model.b.parameters():
            p.requires_grad_(True)
        opt.add_param_group(dict(params=model.b.parameters(), lr=0.001))  # ROOT
    x, y = th.randn(16, 4), th.randint(0, 2, (16,))
    loss = th.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()  # SYMPTOM
    print(epoch, sched.get_last_lr())
