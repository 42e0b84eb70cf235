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
