"""Held-out batch 40 (docs/triage/ho40.md) at run time, real torch, in other spellings than
the cases':

- "Inference tensors cannot be saved for backward" raised on a step the tracer did not record
  is explained by GT204 on the ``with torch.inference_mode():`` whose block assigned the
  tensor, read from the traceback's frames, in the failing function or a caller that handed
  the tensor down (NOTE [inference block from the frames]); the look-alike uses
  ``torch.no_grad()`` and runs clean.
- A numpy conversion of a tensor that got its graph from an in-place write into a tensor
  that had none (``self.buf[:] = net(x)``, ``buf.copy_(net(x))``) names the write
  (NOTE [graph written into a plain tensor]); a buffer that already had a graph keeps the
  former reading; the look-alike writes ``.detach()`` and runs clean."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

DISTIL = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)

def distil_term(logits, soft):
    return F.kl_div(F.log_softmax(logits, dim=1), soft, reduction="batchmean")

def train(where):
    student, teacher = nn.Linear(4, 3), nn.Linear(4, 3).requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    for step in range(30):
        x = torch.randn(8, 4)
        out = student(x)
        loss = out.pow(2).mean()
        if step >= 25:
            with {mode}:
                soft = F.softmax(teacher(x), dim=1)
            loss = loss + distil_term(out, soft) if where == "helper" else \\
                loss + F.kl_div(F.log_softmax(out, dim=1), soft, reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()

train("{where}")
"""


@pytest.mark.parametrize("mode,where", [("torch.inference_mode()", "here"),
                                        ("torch.inference_mode()", "helper"),
                                        ("torch.no_grad()", "here")])
def test_inference_block_from_frames(run_script, mode: str, where: str) -> None:
    res = run_script(DISTIL.replace("{mode}", mode).replace("{where}", where))
    got = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT204"]
    if mode == "torch.no_grad()":  # the look-alike: an ordinary no-grad tensor
        assert got == [] and res.code == 0, res.err
    else:  # the block, not the kl_div line (19/20) nor the helper (7)
        assert res.code != 0 and got[:1] == [("GT204", 17)], res.err


WRITE = """
import numpy as np
import torch
import torch.nn as nn
torch.manual_seed(0)

class Bridge:
    def __init__(self):
        self.state = torch.zeros(2, 3)
    def store(self, value, how):
        if how == "slice":
            self.state[:, :] = value
        elif how == "copy":
            self.state.copy_(value)
        elif how == "detached":
            self.state[:, :] = value.detach()
        else:
            self.state = value * 1.0
            self.state[:, :] = value
    def targets(self):
        return self.state * 0.5

net = nn.Linear(3, 3)
bridge = Bridge()
for i in range(3):
    bridge.store(net(torch.randn(2, 3)), "{how}")
    sent = np.asarray(bridge.targets())
"""


@pytest.mark.parametrize("how,line", [("slice", 11), ("copy", 13), ("detached", None),
                                      ("graph", 20)])
def test_graph_written_into_plain_tensor(run_script, how: str, line: int | None) -> None:
    res = run_script(WRITE.replace("{how}", how))
    got = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT807"]
    if line is None:  # the look-alike: the value written is detached
        assert got == [] and res.code == 0, res.err
    else:  # the write into the plain buffer; a buffer with a graph keeps `targets()` (20)
        assert got[:1] == [("GT807", line)], res.err


DDP_BRANCH = """
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

class Proj(nn.Sequential):
    def __init__(self, n):
        super().__init__(nn.Linear(n, n), nn.Tanh())

class Stage(nn.Module):
    def __init__(self, n, first, aux_everywhere):
        super().__init__()
        self.body = nn.Linear(n, n)
        self.first = first
        if first and not aux_everywhere:
            self.side = nn.Identity()
        else:
            self.side = Proj(n)
    def forward(self, pair):
        x, s = pair
        x = self.body(x)
        s = x if self.first else self.side(s) + x
        return x, s

def train(aux_everywhere):
    torch.manual_seed(0)
    net = nn.Sequential(Stage(4, True, aux_everywhere), Stage(4, False, aux_everywhere))
    model = DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        x, s = model((torch.randn(3, 4), None))
        opt.zero_grad()
        (x.sum() + s.sum()).backward()
        opt.step()
"""


@pytest.fixture
def one_rank_group(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("no gloo backend")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("everywhere", [True, False])
def test_unrun_branch_named_where_built(tmp_path, one_rank_group, everywhere: bool) -> None:
    """everywhere: the first stage also builds a Proj it never calls (the buggy twin)."""
    import runpy

    import gradtrace
    from gradtrace.runtime.distributed.ranks import rank_session

    path = tmp_path / "prog.py"
    path.write_text(DDP_BRANCH, encoding="utf-8")
    train = runpy.run_path(str(path))["train"]
    found, error = [], ""
    with gradtrace.trace() as tr, rank_session(tr, check_sync=0) as rs:
        try:
            train(everywhere)
        except RuntimeError as exc:
            error = str(exc)
            found = rs.diagnose(exc)
    if not everywhere:  # the look-alike: the first stage's side branch is an Identity
        assert error == "" and not [f for f in tr.findings if f.code == "GT880"]
    else:  # the buggy twin: the Proj built in the first stage, never run (18), not DDP (28)
        assert "finished reduction" in error
        assert [(f.code, f.line) for f in found] == [("GT880", 18)], found


FOCAL = """
import torch
import torch.nn as nn
torch.manual_seed(0)

def focal(p, gt):
    keep = gt.lt(1).float()
    return -(torch.log(1 - p) * p.pow(2) * keep).sum() / gt.numel()

head = nn.Linear(4, 3)
opt = torch.optim.SGD(head.parameters(), lr=0.01)
for step in range(4):
    x, gt = torch.randn(8, 4), (torch.rand(8, 3) > 0.7).float()
    if step == {start}:
        head.bias.data.fill_(40.0)
    p = {squash}
    loss = focal(p, gt)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("squash,start,line", [
    ("torch.sigmoid(head(x))", 0, 15),  # NaN in the first forward (NOTE [forward NaN origin])
    ("torch.sigmoid(head(x))", 2, 15),  # a later NaN loss (NOTE [NaN loss hunted])
    ("torch.sigmoid(head(x)).clamp(1e-4, 1 - 1e-4)", 0, None)])
def test_log_of_saturated_sigmoid(run_script, squash: str, start: int, line: int | None) -> None:
    res = run_script(FOCAL.replace("{squash}", squash).replace("{start}", str(start)))
    got = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT825"]
    if line is None:  # the look-alike: the sigmoid's output is clamped into (eps, 1 - eps)
        assert got == [] and res.code == 0, res.err
    else:  # the sigmoid that rounded to 1.0, not the log's product on the loss line (8)
        assert got[:1] == [("GT825", line)], res.err
