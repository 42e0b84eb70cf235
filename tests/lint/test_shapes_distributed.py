"""DistributedDataParallel shapes (GT450-GT455): each buggy twin is reported on its line and
*run* on real torch (a one-process gloo group), where it fails or skips the all-reduce as the
finding says; each look-alike is silent and runs."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
allreduces = []
def count_hook(state, bucket):
    allreduces.append(1)
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut
"""
REDUCTION = (RuntimeError, "Expected to have finished reduction in the prior iteration")




SHAPES: dict[str, Shape] = {
    "layer-never-used": Shape("""
        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.highway = nn.Linear(4, 4)
            def forward(self, x):
                return self.encoder(x)
        model = DDP(UNet())
        for _ in range(2):
            model(torch.randn(2, 4)).sum().backward()
        """, "GT450", 5, REDUCTION),
    "layer-never-used-but-unused-parameters-found-ok": Shape("""
        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.highway = nn.Linear(4, 4)
            def forward(self, x):
                return self.encoder(x)
        model = DDP(UNet(), find_unused_parameters=True)
        for _ in range(2):
            model(torch.randn(2, 4)).sum().backward()
        """, "GT450", holds="model.module.encoder.weight.grad is not None"),
    "head-only-on-some-batches": Shape("""
        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.roi_head = nn.Linear(4, 2)
            def forward(self, img, gt_boxes):
                x = torch.relu(self.backbone(img))
                loss = x.pow(2).mean()
                if gt_boxes.numel() > 0:
                    loss = loss + self.roi_head(x).pow(2).mean()
                return loss
        def train():
            model = DistributedDataParallel(Detector())
            for boxes in (torch.zeros(0, 4), torch.ones(1, 4)):
                model(torch.randn(2, 4), boxes).backward()
        train()
        """, "GT451", 13, REDUCTION),
    "head-only-on-some-batches-with-unused-search-ok": Shape("""
        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.roi_head = nn.Linear(4, 2)
            def forward(self, img, with_roi):
                x = torch.relu(self.backbone(img))
                if not with_roi:
                    return x.pow(2).mean()
                return self.roi_head(x).pow(2).mean()
        model = DistributedDataParallel(Detector(), find_unused_parameters=True)
        for it in range(3):
            model(torch.randn(2, 4), it % 2 == 1).backward()
        """, "GT451", holds="model.module.roi_head.weight.grad is not None"),
    "freeze-after-wrap-in-a-helper": Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.heads = nn.Linear(4, 2)
            def forward(self, x):
                return self.heads(torch.relu(self.backbone(x)))
        def freeze_backbone(model):
            for p in model.module.backbone.parameters():
                p.requires_grad = False
        model = DistributedDataParallel(Net())
        for it in range(3):
            if it == 1:
                freeze_backbone(model)
            model(torch.randn(2, 4)).sum().backward()
        """, "GT452", 10, REDUCTION),
    "freeze-before-wrap-ok": Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.heads = nn.Linear(4, 2)
            def forward(self, x):
                return self.heads(torch.relu(self.backbone(x)))
        def freeze_backbone(model):
            for p in model.backbone.parameters():
                p.requires_grad = False
        net = Net()
        freeze_backbone(net)
        model = DistributedDataParallel(net)
        for it in range(3):
            model(torch.randn(2, 4)).sum().backward()
        """, "GT452", holds="model.module.backbone.weight.grad is None"),
    # a teacher frozen whole after wrapping (DINO): no backward reaches its reducer
    "teacher-frozen-whole-after-wrap-ok": Shape("""
        def main():
            student = DDP(nn.Linear(4, 2))
            teacher = DDP(nn.Linear(4, 2))
            for p in teacher.parameters():
                p.requires_grad = False
            for _ in range(3):
                x = torch.randn(2, 4)
                (student(x) - teacher(x)).pow(2).mean().backward()
            return teacher
        teacher = main()
        """, "GT452", holds="teacher.module.weight.grad is None"),
    "teacher-frozen-whole-then-head-unfrozen": Shape("""
        class Teacher(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.head = nn.Linear(4, 4), nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.body(x))
        def main():
            student = DDP(nn.Linear(4, 2))
            teacher = DDP(Teacher())
            for p in teacher.parameters():
                p.requires_grad = False
            teacher.module.head.requires_grad_(True)
            for _ in range(3):
                x = torch.randn(2, 4)
                (student(x) - teacher(x)).pow(2).mean().backward()
        main()
        """, "GT452", 11, REDUCTION),
    "forward-through-module-alias": Shape("""
        def train(policy):
            model = DistributedDataParallel(policy)
            model.register_comm_hook(None, count_hook)
            unwrapped = model.module if isinstance(model, DistributedDataParallel) else model
            for _ in range(2):
                logp = torch.log_softmax(unwrapped(torch.randn(3, 4)), -1)[:, 0]
                loss = -(logp * torch.randn(3)).mean()
                loss.backward()
        train(nn.Linear(4, 3))
        """, "GT453", 6, holds="len(allreduces) == 0"),
    "forward-through-wrapper-ok": Shape("""
        def train(policy):
            model = DistributedDataParallel(policy)
            model.register_comm_hook(None, count_hook)
            with torch.no_grad():
                ref = model.module(torch.randn(3, 4))
            for _ in range(2):
                logp = torch.log_softmax(model(torch.randn(3, 4)), -1)[:, 0]
                loss = -(logp * ref[:, 0]).mean()
                loss.backward()
        train(nn.Linear(4, 3))
        """, "GT453", holds="len(allreduces) == 2"),
    # the 1/world_size scale needs two ranks (tests/realworld/cases/distributed/
    # drafter_loss_divided_by_global_tokens.py runs them): here the twins are checked statically
    # and run to show they are valid code
    "loss-over-global-tokens": Shape("""
        def step(model, x, labels):
            loss_sum = F.cross_entropy(model(x), labels, reduction="sum")
            tokens = torch.tensor(float(labels.numel()))
            dist.all_reduce(tokens)
            loss = loss_sum / tokens
            loss.backward()
        step(DDP(nn.Linear(4, 3)), torch.randn(5, 4), torch.randint(0, 3, (5,)))
        """, "GT454", 5),
    "loss-over-global-tokens-times-world-size-ok": Shape("""
        def step(model, x, labels):
            loss_sum = F.cross_entropy(model(x), labels, reduction="sum")
            tokens = torch.tensor(float(labels.numel()))
            dist.all_reduce(tokens)
            loss = loss_sum * dist.get_world_size() / tokens
            loss.backward()
        step(DDP(nn.Linear(4, 3)), torch.randn(5, 4), torch.randint(0, 3, (5,)))
        """, "GT454"),
    # a skip on one rank hangs the others only with two ranks (tests/realworld/cases/distributed/
    # dflash_per_rank_skip_desyncs_ddp.py runs them); one rank runs the twins without error
    "step-raises-on-this-rank-and-loop-continues": Shape("""
        class NoAnchors(Exception):
            pass
        def train_step(model, batch):
            if batch.size(0) < 3:
                raise NoAnchors()
            model(batch).pow(2).mean().backward()
        model = DDP(nn.Linear(4, 4))
        for batch in (torch.randn(2, 4), torch.randn(4, 4)):
            try:
                train_step(model, batch)
            except (NoAnchors, ValueError):
                continue
        """, "GT455", 12),
    "step-skip-decided-on-every-rank-ok": Shape("""
        class NoAnchors(Exception):
            pass
        def train_step(model, batch):
            skip = torch.tensor(float(batch.size(0) < 3))
            dist.all_reduce(skip)
            if skip.item() > 0:
                raise NoAnchors()
            model(batch).pow(2).mean().backward()
        model = DDP(nn.Linear(4, 4))
        for batch in (torch.randn(2, 4), torch.randn(4, 4)):
            try:
                train_step(model, batch)
            except NoAnchors:
                continue
        """, "GT455", holds="model.module.weight.grad is not None"),
}


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_is_judged_as_torch_behaves(name: str, group: None) -> None:
    judge(PRELUDE, SHAPES[name])
