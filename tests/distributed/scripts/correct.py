"""A correct DDP training loop (logging with .item(), validation under no_grad, frozen
embedding, find_unused_parameters for a head used only every other step on every rank)."""
import hashlib
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 1)
        self.extra = nn.Linear(8, 1)
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)

    def forward(self, x, step):
        h = torch.relu(self.body(self.frozen(x)))
        out = self.head(h)
        if step % 2 == 0:  # same decision on every rank
            out = out + self.extra(h)
        return out


dist.init_process_group("gloo", timeout=timedelta(seconds=20))
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(Net(), find_unused_parameters=True)
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
gen = torch.Generator().manual_seed(100 + rank)  # different data on every rank
losses = []
for step in range(6):
    x, y = torch.randn(16, 4, generator=gen), torch.randn(16, 1, generator=gen)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x, step), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
model.eval()
with torch.no_grad():
    val = model(torch.randn(4, 4, generator=gen), 1).mean().item()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
dist.destroy_process_group()
print(f"rank {rank} ok {len(losses)} digest {digest.hexdigest()} loss {losses[-1]!r};",
      file=sys.stderr)
