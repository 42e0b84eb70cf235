"""Two views of a batch through the DDP model before one backward, with find_unused_parameters
(SimCLR-style, one head per view): "Expected to mark a variable ready only once"."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 2), nn.Linear(4, 2)])

    def forward(self, x, view):
        return self.heads[view](x)


dist.init_process_group("gloo", timeout=timedelta(seconds=20))
torch.manual_seed(0)
model = DDP(TwoHeads(), device_ids=None, find_unused_parameters=True)  # <- flag
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x = torch.randn(8, 4)
    outs = [model(x, v) for v in range(2)]
    loss = sum(o.pow(2).mean() for o in outs)
    opt.zero_grad()
    loss.backward()  # <- raised
    opt.step()
dist.destroy_process_group()
