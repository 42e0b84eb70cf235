"""GT459: a DDP model's output that no loss reads, made by layers no other output uses. Buggy
twins (other spellings than the case's and the rule's example) are reported on their line and
raise the reducer error on real torch (a one-process gloo group); the look-alikes (the output in
the loss, an output that shares its layers, an explicit `_` discard with unused-parameter search,
find_unused_parameters) are silent and run."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge
from tests.lint.test_shapes_distributed import PRELUDE, REDUCTION

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

HEADS = """
class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.main = nn.Linear(4, 2)
        self.rot = nn.Linear(4, 3)

    def forward(self, x):
        feats = torch.relu(self.stem(x))
        rot = self.rot(feats)
        return self.main(feats), rot
"""

SHAPES: dict[str, Shape] = {
    "both-outputs-in-loss-ok": Shape(HEADS + """
model = DDP(Heads())
for _ in range(2):
    main, rot = model(torch.randn(2, 4))
    loss = main.pow(2).mean() + 0.1 * rot.pow(2).mean()
    loss.backward()
""", "GT459", holds="model.module.rot.weight.grad is not None"),
    "dropped-output-shares-layers-ok": Shape("""
class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        return self.out(h), h
model = DDP(Enc())
for _ in range(2):
    y, hidden = model(torch.randn(2, 4))
    loss = y.pow(2).mean()
    loss.backward()
""", "GT459", holds="model.module.fc.weight.grad is not None"),
    "underscore-discard-with-search-ok": Shape(HEADS + """
model = DDP(Heads(), find_unused_parameters=True)
for _ in range(2):
    main, _rot = model(torch.randn(2, 4))
    loss = main.pow(2).mean()
    loss.backward()
""", "GT459", holds="model.module.rot.weight.grad is None"),
    "script-loop-drops-rotation-head": Shape(HEADS + """
model = DistributedDataParallel(Heads())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    logits, rot_logits = model(torch.randn(2, 4))
    loss = logits.logsumexp(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""", "GT459", 17, REDUCTION),
    "helper-given-the-wrapper-drops-output": Shape(HEADS + """
def fit(net, steps):
    for _ in range(steps):
        main, rot = net(torch.randn(2, 4))
        total = F.mse_loss(main, torch.zeros(2, 2))
        total.backward()

fit(DDP(Heads().float()), 2)
""", "GT459", 16, REDUCTION),
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
