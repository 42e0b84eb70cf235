"""The mmyolo backbone after the fix: `__init__` ends with `self._freeze_stages()`, so the stem and first stage already have `requires_grad=False` when the runner wraps the model in DistributedDataParallel, the reducer never waits for their gradients, and every iteration finishes its reduction (the `train()` override still re-applies the freeze, as in the fix).

source: https://github.com/open-mmlab/mmyolo/pull/945
kind: lookalike
launch: torchrun --nproc-per-node=2
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class CSPDarknetLite(nn.Module):
    def __init__(self, frozen_stages=1):
        super().__init__()
        self.frozen_stages = frozen_stages
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU())
        self.stage1 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.SiLU())
        self.stage2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.SiLU())
        self.layers = ["stem", "stage1", "stage2"]
        self._freeze_stages()

    def _freeze_stages(self):
        for name in self.layers[: self.frozen_stages + 1]:
            layer = getattr(self, name)
            layer.eval()
            for param in layer.parameters():
                param.requires_grad = False

    def train(self, mode=True):
        super().train(mode)
        self._freeze_stages()
        return self

    def forward(self, x):
        return self.stage2(self.stage1(self.stem(x)))


class YOLODetectorLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = CSPDarknetLite(frozen_stages=1)
        self.head = nn.Conv2d(32, 5, 1)

    def forward(self, images):
        return self.head(self.backbone(images))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DDP(YOLODetectorLite())
    model.train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(rank)
    for step in range(3):
        images = torch.randn(4, 3, 32, 32, generator=gen)
        targets = torch.rand(4, 5, 8, 8, generator=gen)
        loss = F.binary_cross_entropy_with_logits(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
