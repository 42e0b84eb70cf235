"""MMEditing's DistributedDataParallelWrapper wraps every child of the model in its own DistributedDataParallel, skipping only children with no parameters at all; a restorer with a perceptual loss has a child (the loss's VGG feature extractor) whose parameters all have `requires_grad=False`, and DDP refuses to wrap it, so distributed training of the model fails at start-up.

source: https://github.com/open-mmlab/mmagic/commit/f79a018614c4976747b7e0dc427257698e58f2ed
kind: bug
symptom: crash
verified: DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient
"""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

torch.manual_seed(0)


class DistributedDataParallelWrapper(nn.Module):
    """Wrap the modules in the model with separate DistributedDataParallel (only modules with parameters)."""

    def __init__(self, module, device_ids, dim=0, broadcast_buffers=False, find_unused_parameters=False, **kwargs):
        super().__init__()
        self.module = module
        self.dim = dim
        self.to_ddp(device_ids=device_ids, dim=dim, broadcast_buffers=broadcast_buffers,
                    find_unused_parameters=find_unused_parameters, **kwargs)

    def to_ddp(self, device_ids, dim, broadcast_buffers, find_unused_parameters, **kwargs):
        for name, module in self.module._modules.items():
            if next(module.parameters(), None) is None:  # ROOT
                module = module.to(DEVICE)
            else:
                module = DistributedDataParallel(module.to(DEVICE), device_ids=device_ids, dim=dim,
                                                 broadcast_buffers=broadcast_buffers,
                                                 find_unused_parameters=find_unused_parameters, **kwargs)
            self.module._modules[name] = module

    def train_step(self, data_batch, optimizer):
        return self.module.train_step(data_batch, optimizer)


class PerceptualLoss(nn.Module):
    """Stands in for mmedit's PerceptualLoss: a frozen (pretrained) VGG-like feature extractor."""

    def __init__(self, perceptual_weight=1.0):
        super().__init__()
        self.vgg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        for v in self.vgg.parameters():
            v.requires_grad = False
        self.perceptual_weight = perceptual_weight

    def forward(self, x, gt):
        return self.perceptual_weight * F.mse_loss(self.vgg(x), self.vgg(gt.detach()))


class BasicRestorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))
        self.pixel_loss = nn.L1Loss()
        self.perceptual_loss = PerceptualLoss()

    def train_step(self, data_batch, optimizer):
        output = self.generator(data_batch["lq"])
        loss = self.pixel_loss(output, data_batch["gt"]) + self.perceptual_loss(output, data_batch["gt"])
        optimizer["generator"].zero_grad()
        loss.backward()
        optimizer["generator"].step()
        return {"loss": loss.item()}


DEVICE = torch.device("cpu")
with tempfile.TemporaryDirectory() as tmp:
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"), rank=0, world_size=1)
    model = BasicRestorer()
    optimizer = {"generator": torch.optim.Adam(model.generator.parameters(), lr=1e-3)}
    model = DistributedDataParallelWrapper(model, device_ids=None, broadcast_buffers=False,
                                           find_unused_parameters=False)
    for it in range(3):
        gt = torch.rand(4, 3, 16, 16)
        outputs = model.train_step({"lq": gt + 0.1 * torch.randn_like(gt), "gt": gt}, optimizer)
        print(f"iter {it}: loss {outputs['loss']:.4f}")
    dist.destroy_process_group()
