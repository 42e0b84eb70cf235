"""Session 31, the lead: a perceptual loss whose features of the generated image are taken
under ``no_grad`` (NOTE [term read under no_grad]). The run sees a loss term with no graph
added to one that has a graph (GT844) at the statement that read the generated image under
the block, the line to take out of it (the real image's features stay there); the checker's
GT218 at the ``with`` is attached as context. With the generated image's features taken with
grad the run is silent."""
from __future__ import annotations

from rt_helpers import marked_line

SRC = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
vgg = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
for p in vgg.parameters():
    p.requires_grad_(False)
opt = torch.optim.Adam(G.parameters(), lr=1e-3)
loader = [(torch.randn(4, 8), torch.randn(4, 8)) for _ in range(4)]


def train():
    for lr_img, hr_img in loader:
        fake = G(lr_img)
        l1 = F.l1_loss(fake, hr_img)
        with torch.no_grad():
            f_real = vgg(hr_img)
            f_fake = vgg(fake)  # <- cause
        loss = l1 + 0.01 * F.mse_loss(f_fake, f_real)
        opt.zero_grad()
        loss.backward()
        opt.step()


train()
"""


def test_perceptual_features_under_no_grad_lead_with_the_statement(run_script):
    res = run_script(SRC)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert (first["code"], first["line"], first["source"]) == (
        "GT844", marked_line(SRC), "static+runtime"), res.findings
    block = marked_line(SRC) - 2
    assert any("GT218" in r["message"] and r["line"] == block for r in first["related"]), first


def test_features_of_the_output_taken_with_grad_are_silent(run_script):
    fixed = SRC.replace("            f_fake = vgg(fake)\n", "").replace(
        "F.mse_loss(f_fake, f_real)", "F.mse_loss(vgg(fake), f_real)")
    res = run_script(fixed)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["code"] in ("GT218", "GT844")] == [], res.findings
