"""`gradtrace run` on the training scripts of docs/triage/unseen15.md (session 15).

FactorVAE's step (`vae_loss.backward(retain_graph=True)`, `optim_VAE.step()`, then the
discriminator's loss backwarded through the same `D_z`) raises on its first pass, before
`optim_D.step()` is reached: the crash is the finding (GT601), and the discriminator's
optimizer, not yet stepped when the pass was cut, is no 'optimizer never stepped' (GT821).
Here in other spellings: an encoder and a critic of plain layers. Twin: the critic's
optimizer really is never stepped, and the crash comes on the second pass, after two steps
of the other optimizer: GT821 is still reported. Real torch, in-process runs."""
from __future__ import annotations

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
enc = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))
crit = nn.Linear(3, 2)
opt_enc = torch.optim.SGD(enc.parameters(), lr=0.1)
opt_crit = torch.optim.SGD(crit.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.zeros(8, dtype=torch.long)
"""

CUT_FIRST_PASS = HEAD + """
for step in range(3):
    score = crit(enc(x))
    opt_enc.zero_grad()
    score.mean().backward(retain_graph=True)
    opt_enc.step()
    crit_loss = F.cross_entropy(score, y)
    opt_crit.zero_grad()
    crit_loss.backward()
    opt_crit.step()
"""

NEVER_STEPPED = HEAD + """
for step in range(3):
    score = crit(enc(x))
    opt_enc.zero_grad()
    score.mean().backward(retain_graph=True)
    opt_enc.step()  # S
    if step == 1:
        F.cross_entropy(score, y).backward()
"""


def test_optimizer_cut_before_its_step_by_the_crash_is_not_never_stepped(run_script):
    res = run_script(CUT_FIRST_PASS.lstrip("\n"))
    codes = [f["code"] for f in res.findings]
    assert res.code != 0 and "modified by an inplace operation" in res.err
    assert "GT601" in codes and "GT821" not in codes, res.err


def test_optimizer_never_stepped_over_two_passes_is_still_reported(run_script):
    src = NEVER_STEPPED.lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# S"))
    res = run_script(src)
    assert res.code != 0 and "modified by an inplace operation" in res.err
    assert ("GT821", line) in [(f["code"], f["line"]) for f in res.findings], res.err
