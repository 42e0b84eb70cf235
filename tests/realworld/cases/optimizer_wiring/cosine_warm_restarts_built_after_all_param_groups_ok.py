"""Both layers' parameter groups are given to Adam before CosineAnnealingWarmRestarts is built (layer b frozen by requires_grad until it is unfrozen), so the scheduler anneals every group.

source: https://github.com/pytorch/pytorch/issues/79888
kind: lookalike
verified: 4 epochs run; both groups follow the cosine schedule
"""
import collections

import torch as th

th.manual_seed(0)
model = th.nn.Sequential(collections.OrderedDict(a=th.nn.Linear(4, 8), b=th.nn.Linear(8, 2)))
for p in model.b.parameters():
    p.requires_grad_(False)
opt = th.optim.Adam([dict(params=model.a.parameters(), lr=0.001),
                     dict(params=model.b.parameters(), lr=0.001)])
sched = th.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=10)

for epoch in range(4):
    if epoch == 2:
        for p in model.b.parameters():
            p.requires_grad_(True)
    x, y = th.randn(16, 4), th.randint(0, 2, (16,))
    loss = th.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    print(epoch, sched.get_last_lr())
