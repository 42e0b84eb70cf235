"""GT460: a reentrant checkpoint inside a DDP model, with find_unused_parameters=True or a
module two checkpointed calls share. Buggy twins (other spellings than the cases' and the rule's
example: the default use_reentrant, a checkpoint in a nested class, one attribute checkpointed
twice) are reported on their line and raise on real torch (a one-process gloo group); the
look-alikes (no search and no sharing, static_graph=True, use_reentrant=False) run."""
from __future__ import annotations

import warnings

import pytest

from tests.lint.shape_runner import Shape, judge
from tests.lint.test_shapes_distributed import PRELUDE

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

READY = (RuntimeError, "Expected to mark a variable ready only once")
HEAD = PRELUDE + "from torch.utils import checkpoint as ckpt\n"

SHAPES: dict[str, Shape] = {
    "reentrant-without-search-ok": Shape("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        x = ckpt.checkpoint(self.a, x, use_reentrant=True)
        return ckpt.checkpoint(self.b, x, use_reentrant=True)
model = DDP(Net())
for _ in range(2):
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
""", "GT460", holds="model.module.a.weight.grad is not None"),
    "shared-with-static-graph-ok": Shape("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        x = ckpt.checkpoint(self.a, x, use_reentrant=True)
        return ckpt.checkpoint(self.a, x, use_reentrant=True)
model = DDP(Net(), static_graph=True)
for _ in range(2):
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
""", "GT460", holds="model.module.a.weight.grad is not None"),
    "only-layer-checkpointed-twice-ok": Shape("""
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 4)

    def forward(self, x):
        x = ckpt.checkpoint(self.shared, x, use_reentrant=True)
        return ckpt.checkpoint(self.shared, x, use_reentrant=True)
model = DDP(Tied())
for _ in range(2):
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
""", "GT460", holds="model.module.shared.weight.grad is not None"),
    "search-with-non-reentrant-ok": Shape("""
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return x + ckpt.checkpoint(self.fc, x, use_reentrant=False)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(x)
model = DistributedDataParallel(Net(), find_unused_parameters=True)
for _ in range(2):
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
""", "GT460", holds="model.module.blocks[0].fc.weight.grad is not None"),
    "default-reentrant-in-nested-block-with-search": Shape("""
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return x + ckpt.checkpoint(self.fc, x)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(x)
model = DistributedDataParallel(Net(), find_unused_parameters=True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for _ in range(2):
        model(torch.randn(2, 4, requires_grad=True)).sum().backward()
""", "GT460", 7, READY),
    "one-attribute-checkpointed-twice": Shape("""
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared, self.proj = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        x = ckpt.checkpoint(self.shared, self.proj(x), use_reentrant=True)
        return ckpt.checkpoint(self.shared, x, use_reentrant=True)
def train():
    model = DDP(Tied())
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
train()
""", "GT460", 7, READY),
}


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_is_judged_as_torch_behaves(name: str, group: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        judge(HEAD + "import warnings\n", SHAPES[name])
