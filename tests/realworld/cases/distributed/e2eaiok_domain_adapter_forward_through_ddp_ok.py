"""intel/e2eAIOK's domain-adaptation trainer after its fix: the classifier and discriminator outputs come from one call of the DistributedDataParallel-wrapped module (`self.model(source, target)`), so DDP arms its reducer in its own forward, the backward of the summed loss all-reduces the gradients, and the ranks' replicas stay identical.

source: https://github.com/intel/e2eAIOK/pull/198
kind: lookalike
launch: torchrun --nproc-per-node=2
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

torch.set_num_threads(1)


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, coeff):
        ctx.coeff = coeff
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.coeff * grad, None


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.classifier = nn.Linear(32, 4)

    def forward(self, x):
        feat = self.features(x)
        return feat, self.classifier(feat)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, feat, coeff=1.0):
        return self.net(GradReverse.apply(feat, coeff))


class TransferModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone()
        self.discriminator = Discriminator()

    def forward(self, source, target):
        feat_s, logits_s = self.backbone(source)
        feat_t, _ = self.backbone(target)
        return logits_s, self.discriminator(torch.cat([feat_s, feat_t]))


class DomainAdapterTrainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(self, source, labels, target):
        logits_s, domain_logits = self.model(source, target)
        domain_labels = torch.cat([torch.ones(len(source), 1), torch.zeros(len(target), 1)])
        loss = F.cross_entropy(logits_s, labels) + F.binary_cross_entropy_with_logits(domain_logits, domain_labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def rank_gap(model):
    """Largest difference between this rank's weights and rank 0's (read only)."""
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return max((g - gathered[0]).abs().max().item() for g in gathered)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(TransferModel())
    trainer = DomainAdapterTrainer(model)
    start_gap = rank_gap(model)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(4):
        source = torch.randn(8, 16, generator=gen)
        labels = torch.randint(0, 4, (8,), generator=gen)
        target = torch.randn(8, 16, generator=gen) + 0.5
        loss = trainer.train_step(source, labels, target)
        if rank == 0:
            print(f"step {step} loss {loss:.4f}")
    end_gap = rank_gap(model)
    if rank == 0:
        print(f"largest weight difference between ranks: {start_gap:.4f} at start, {end_gap:.4f} after 4 steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
