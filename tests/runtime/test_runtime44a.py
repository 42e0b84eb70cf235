"""runtime44a on real torch, one process each, tiny models.

- NOTE [tensor attribute left behind] (GT863): a module caches a tensor as a plain attribute
  (MobileSAM's TinyViT ``self.ab`` in an overridden ``train()``), the module is converted with
  ``.half()``, the forward mixes the stale attribute with converted values and
  torch raises a dtype mismatch: named at the ``self.<name> = ...`` assignment. Look-alikes:
  the same tensor registered as a buffer (converted, runs), and a dtype mismatch whose cause
  is the input, with the attribute converted by hand (GT839 at the crash, no GT863).
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

CACHED = """
import torch
import torch.nn as nn

class Biased(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(4, 12)
        self.biases = nn.Parameter(torch.zeros(3))
        self.register_buffer("idx", torch.tensor([[0, 1, 2], [2, 1, 0], [1, 1, 1]]))

    def train(self, mode=True):
        super().train(mode)
        if not mode:
            with torch.no_grad():
                STORE

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        bias = self.biases[self.idx] if self.training else self.ab
        attn = (q @ k.transpose(-2, -1) + bias).softmax(-1)
        return attn @ v

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Biased()

    def forward(self, x):
        return x + self.block(x)

enc = Encoder()
enc.eval()
enc.CONVERT()
out = enc(torch.randn(2, 3, 4).to(DTYPE))
print(out.dtype)
"""
PLAIN = CACHED.replace("STORE", "self.ab = self.biases[self.idx]  # <- cause")
BUFFER = CACHED.replace("STORE", "self.register_buffer('ab', self.biases[self.idx], "
                                 "persistent=False)")


def test_attribute_left_behind_by_conversion_named_at_its_assignment(run_script):
    src = PLAIN.replace("CONVERT", "half").replace("DTYPE", "torch.float16")
    res = run_script(src)
    assert res.code != 0 and "Half" in res.err, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT863", marked_line(src))], \
        res.findings


def test_attribute_registered_as_buffer_is_converted_and_runs(run_script):
    res = run_script(BUFFER.replace("CONVERT", "half").replace("DTYPE", "torch.float16"))
    assert res.code == 0, res.err
    assert "GT863" not in res.codes(), res.findings


def test_mismatch_from_the_input_is_not_the_attribute(run_script):
    # nothing converted: the float16 input meets float32 weights; the attribute is float32
    # like the parameters, so it is not what was left behind
    src = PLAIN.replace("CONVERT", "float").replace("DTYPE", "torch.float16")
    res = run_script(src)
    assert res.code != 0, res.err
    assert "GT863" not in res.codes(), res.findings
    assert [f["code"] for f in res.findings][:1] == ["GT839"], res.findings


SERVED = """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.plm = nn.Sequential(nn.Embedding(20, 8), nn.Dropout(0.2), nn.Linear(8, 8))
        FREEZE
        self.head = nn.Linear(8, 4)

    def forward(self, ids):
        return self.head(self.plm(ids)).mean(1)

class Embedder:
    def __init__(self, state):
        self.encoder = Encoder()
        self.encoder.load_state_dict(state)

    @torch.inference_mode()
    def __call__(self, ids):
        return self.encoder(ids)

state = Encoder().state_dict()
ids = torch.randint(0, 20, (3, 5))
first, second = Embedder(state)(ids), Embedder(state)(ids)
TAIL
print(torch.equal(first, second))
"""
FROZEN = "self.plm.requires_grad_(False)  # <- cause"
TRAINED = """model = Encoder()
opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
model(ids).sum().backward()
opt.step()"""


def test_frozen_part_served_in_train_mode_named_at_the_freeze(run_script):
    src = SERVED.replace("FREEZE", FROZEN).replace("TAIL", "")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT874", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("freeze,tail", [
    (FROZEN + "\n        self.plm.eval()", ""),  # the fix: eval beside the freeze
    (FROZEN, "Embedder(state).encoder.plm.train()"),  # a file that sets train mode on purpose
    ("pass", ""),  # nothing frozen: NOTE [evaluated as loaded, in train mode] decides
    (FROZEN, TRAINED),  # a training program: NOTE [frozen extractor dropping] decides
], ids=["eval_beside_freeze", "train_mode_on_purpose", "not_frozen", "an_optimizer_exists"])
def test_frozen_part_served_look_alikes_silent(run_script, freeze, tail):
    res = run_script(SERVED.replace("FREEZE", freeze).replace("TAIL", tail))
    assert res.code == 0, res.err
    assert "GT874" not in res.codes(), res.findings


TRAINER = """
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.score = nn.Linear(4, 1)
        self.aux = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
    def forward(self, x, aux=True):
        h = self.trunk(x)
        return self.score(h), (self.aux(h) - x).pow(2).mean() if aux else None

class Trainer:
    def __init__(self, net, lr=0.1, find_unused=DEFAULT):
        self.model = DistributedDataParallel(net, find_unused_parameters=find_unused)
        self.opt = torch.optim.SGD(net.parameters(), lr=lr)

    def step(self, x, aux):
        score, extra = self.model(x, aux=aux)
        loss = score.mean() + extra if aux else score.mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

def train():
    torch.manual_seed(0)
    trainer = CALL
    for i in range(4):
        trainer.step(torch.randn(3, 4), aux=i % 2 == 0)
"""


def _train_one_rank(tmp_path, src):
    import runpy

    import gradtrace
    from gradtrace.runtime.distributed.ranks import rank_session

    path = tmp_path / "prog.py"
    path.write_text(src, encoding="utf-8")
    train = runpy.run_path(str(path))["train"]
    found, error = [], ""
    with gradtrace.trace() as tr, rank_session(tr, check_sync=0) as rs:
        try:
            train()
        except RuntimeError as exc:
            error = str(exc)
            found = rs.diagnose(exc)
    return error, found, tr


@pytest.fixture
def one_rank_group(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("no gloo backend")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def test_ddp_flag_left_at_its_default_named_at_the_default(tmp_path, one_rank_group):
    # the caller leaves the flag out: the default decided it (and `loss.item()` after the
    # backward is a log, never the cut that starved the aux head)
    src = TRAINER.replace("DEFAULT", "False").replace("CALL", "Trainer(TwoHeads())")
    error, found, _ = _train_one_rank(tmp_path, src)
    assert "finished reduction" in error
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "def __init__(self, net" in t)
    assert [(f.code, f.line) for f in found][:1] == [("GT880", line)], found


def test_ddp_flag_passed_by_the_caller_is_not_the_default(tmp_path, one_rank_group):
    src = TRAINER.replace("DEFAULT", "True").replace(
        "CALL", "Trainer(TwoHeads(), find_unused=False)")
    error, found, _ = _train_one_rank(tmp_path, src)
    assert "finished reduction" in error
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "DistributedDataParallel(net" in t)
    assert [(f.code, f.line) for f in found][:1] == [("GT880", line)], found


def test_ddp_flag_default_on_runs_clean(tmp_path, one_rank_group):
    src = TRAINER.replace("DEFAULT", "True").replace("CALL", "Trainer(TwoHeads())")
    error, _, tr = _train_one_rank(tmp_path, src)
    assert error == "" and "GT880" not in [f.code for f in tr.findings]
