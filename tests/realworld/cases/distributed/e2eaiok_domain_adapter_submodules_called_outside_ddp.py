"""intel/e2eAIOK's domain-adaptation trainer combines the classifier network (model A) and the domain discriminator (model B) in one module T and wraps T in DistributedDataParallel, but to add the two losses it takes A and B out of the wrapped module and runs their forward passes directly (here `self.model.module.backbone(...)` and `self.model.module.discriminator(...)`). DDP arms its gradient all-reduce in its own `forward`, so the backward of `loss A + loss B` reduces nothing: every rank steps on its local gradients and the replicas drift apart, with no error (n independent models instead of one). The fix routes the forward through the DDP-wrapped module.

source: https://github.com/intel/e2eAIOK/pull/198
kind: bug
symptom: silent
launch: torchrun --nproc-per-node=2
verified: with 2 ranks the largest difference between the ranks' weights is 0.0000 at the start and 0.0521 after 4 steps (the replicas diverged); in the look-alike it is still 0.0000 after 4 steps
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
        module = self.model.module
        feat_s, logits_s = module.backbone(source)  # ROOT
        feat_t, _ = module.backbone(target)
        domain_logits = module.discriminator(torch.cat([feat_s, feat_t]))
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
