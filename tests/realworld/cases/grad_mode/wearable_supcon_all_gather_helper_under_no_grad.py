"""A wearable-signal foundation model's supervised-contrastive fine-tuning under DDP gathers the two views' projected features from every rank with `concat_all_gather` to build a global batch, and that helper is decorated with `@torch.no_grad()`: every gathered tensor, the rank's own slice included, comes back without a graph, the SupCon loss in `train_one_epoch` is computed only from them, and its `backward()` fails on the first batch.

source: https://github.com/Dryilv/Wearable-Foundation-Model/commit/b7b89cb0974e5d54e68d214f9573113388ec0e22
kind: bug
symptom: crash
launch: torchrun --nproc-per-node=2
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

torch.set_num_threads(1)

SIGNAL_LEN, N_CLASSES = 64, 3


@torch.no_grad()  # ROOT
def concat_all_gather(tensor):
    """Gather `tensor` from every rank and concatenate along the batch."""
    if not dist.is_initialized():
        return tensor
    gathered = [torch.ones_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, tensor.contiguous())
    return torch.cat(gathered, dim=0)


class SignalEncoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(1, 8, 7, stride=2, padding=3), nn.GELU(),
                                  nn.Conv1d(8, dim, 5, stride=2, padding=2), nn.GELU())
        self.proj = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 8))

    def forward(self, x):
        return F.normalize(self.proj(self.conv(x).mean(dim=-1)), dim=-1)


class SupConLoss(nn.Module):
    def __init__(self, temperature=0.1):
        super().__init__()
        self.temperature = temperature

    def forward(self, features, labels):
        sim = features @ features.t() / self.temperature
        self_mask = torch.eye(len(labels), dtype=torch.bool)
        sim = sim.masked_fill(self_mask, -1e9)
        positives = (labels[:, None] == labels[None, :]) & ~self_mask
        log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
        return -((log_prob * positives).sum(1) / positives.sum(1).clamp(min=1)).mean()


def make_batch(rank, n=8):
    g = torch.Generator().manual_seed(100 + rank)
    labels = torch.randint(0, N_CLASSES, (n,), generator=g)
    t = torch.linspace(0, 1, SIGNAL_LEN)
    base = torch.sin(2 * torch.pi * (labels[:, None] + 1) * 3 * t)
    view = lambda: (base + 0.3 * torch.randn(n, SIGNAL_LEN, generator=g)).unsqueeze(1)
    return view(), view(), labels


def train_one_epoch(model, criterion, optimizer, rank, steps=3):
    for _ in range(steps):
        x1, x2, labels = make_batch(rank)
        f1, f2 = model(x1), model(x2)
        all_f1, all_f2 = concat_all_gather(f1), concat_all_gather(f2)
        all_labels = concat_all_gather(labels)
        features_global = torch.cat([all_f1, all_f2], dim=0)
        labels_global = torch.cat([all_labels, all_labels], dim=0)
        loss = criterion(features_global, labels_global)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(SignalEncoder())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = train_one_epoch(model, SupConLoss(), optimizer, rank)
    if rank == 0:
        print(f"final SupCon loss: {loss:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
