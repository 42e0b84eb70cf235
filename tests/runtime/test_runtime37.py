"""Session 37 (docs/triage/runtime37.md): the line `gradtrace run` names for a no-grad block is
the line the user edits (NOTE [block of one statement], NOTE [no_grad kept for a frozen
module]). Each buggy twin is named on its line and its look-alike is silent. Real torch,
in-process, a few steps of tiny models."""
from __future__ import annotations

from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""

# a generator's adversarial term scored by a discriminator inside a one-statement no_grad block
ONE_STATEMENT = HEAD + """
gen, disc = nn.Linear(4, 6), nn.Linear(6, 1).requires_grad_(False)
opt = torch.optim.SGD(gen.parameters(), lr=0.1)
for _ in range(3):
    z, real = torch.randn(8, 4), torch.randn(8, 6)
    fake = gen(z)
    with torch.no_grad():  # <- block
        score = disc(fake)
    loss = F.l1_loss(fake, real) + F.softplus(-score).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# the same block also holds the teacher's forward, which stays under no_grad
TEACHER_BESIDE = ONE_STATEMENT.replace(
    "    with torch.no_grad():  # <- block\n        score = disc(fake)\n",
    "    with torch.no_grad():\n        target = teacher(z)\n        score = disc(fake)  # <- stmt\n"
).replace("gen, disc = ", "teacher = nn.Linear(4, 6).requires_grad_(False)\ngen, disc = "
          ).replace("F.l1_loss(fake, real)", "F.l1_loss(fake, target)")


def _first(res):
    live = [f for f in res.findings if f["source"] != "static"]
    return live[0] if live else None


def test_one_statement_block_names_its_with_line(run_script):
    res = run_script(ONE_STATEMENT)
    assert res.code == 0, res.err
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT844", marked_line(ONE_STATEMENT, "# <- block")), res.findings
    assert any(r["line"] == marked_line(ONE_STATEMENT, "# <- block") + 1
               for r in first["related"]), first


def test_block_kept_for_a_teacher_names_the_statement_to_move(run_script):
    assert TEACHER_BESIDE != ONE_STATEMENT and "teacher(z)" in TEACHER_BESIDE
    res = run_script(TEACHER_BESIDE)
    assert res.code == 0, res.err
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT844", marked_line(TEACHER_BESIDE, "# <- stmt")), res.findings


def test_discriminator_scored_with_grad_is_silent(run_script):
    src = ONE_STATEMENT.replace("    with torch.no_grad():  # <- block\n        score = disc(fake)\n",
                                "    score = disc(fake)\n")
    assert src != ONE_STATEMENT
    res = run_script(src)
    assert res.code == 0, res.err
    assert _first(res) is None, res.findings


# LoRA layers patched into a frozen encoder run inside its forward, all under one no_grad
LORA = HEAD + """
class LoRA(nn.Module):
    def __init__(self, base):
        super().__init__()
        self.down, self.up = nn.Linear(base.in_features, 2, bias=False), nn.Linear(2, base.out_features, bias=False)
        self.base_forward = base.forward
        base.forward = self.forward

    def forward(self, x):
        return self.base_forward(x) + self.up(self.down(x))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.out = nn.Linear(5, 6), nn.Linear(6, 6)

    def forward(self, x):
        return self.out(torch.relu(self.inp(x)))


def encode(encoder, x):
    with torch.no_grad():  # <- cause
        h = encoder(x)
    return h


encoder, head = Encoder().requires_grad_(False), nn.Linear(6, 1)
loras = nn.ModuleList([LoRA(encoder.inp), LoRA(encoder.out)])
opt = torch.optim.SGD([*loras.parameters(), *head.parameters()], lr=0.1)
for _ in range(3):
    x, y = torch.randn(8, 5), torch.randn(8, 1)
    loss = F.mse_loss(head(encode(encoder, x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_lora_inside_a_frozen_encoder_names_the_block(run_script):
    res = run_script(LORA)
    assert res.code == 0, res.err
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT201", marked_line(LORA, "# <- cause")), res.findings


def test_trainable_head_in_the_frozen_encoder_block_names_its_call(run_script):
    # the head's own statement in the block kept for the frozen encoder: that call moves out
    src = LORA.replace("loras = nn.ModuleList([LoRA(encoder.inp), LoRA(encoder.out)])\n", "").replace(
        "[*loras.parameters(), *head.parameters()]", "head.parameters()").replace(
        "        h = encoder(x)\n    return h\n",
        "        h = encoder(x)\n        p = head(h)  # <- call\n    return p\n").replace(
        "head(encode(encoder, x))", "encode(encoder, x) + 0 * head.bias")
    assert src != LORA
    res = run_script(src)
    assert res.code == 0, res.err
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT201", marked_line(src, "# <- call")), res.findings


def test_lora_encoder_run_with_grad_is_silent(run_script):
    src = LORA.replace("    with torch.no_grad():  # <- cause\n        h = encoder(x)\n",
                       "    h = encoder(x)\n")
    assert src != LORA
    res = run_script(src)
    assert res.code == 0, res.err
    assert _first(res) is None, res.findings


# a spiking layer's surrogate gradient written by hand: exp(-k*u) overflows far below the
# threshold and inf / inf is NaN (NOTE [NaN born in a custom backward])
SURROGATE = HEAD + """
class Spike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, k=25.0):
        ctx.save_for_backward(u)
        ctx.k = k
        return (u > 0).float()

    @staticmethod
    def backward(ctx, g):
        (u,) = ctx.saved_tensors
        e = torch.exp(-ctx.k * u)
        surrogate = g * ctx.k * e / (e + 1) ** 2  # <- cause
        return surrogate, None


fc = nn.Linear(3, 2)
with torch.no_grad():
    fc.weight.copy_(torch.eye(2, 3))
    fc.bias.zero_()
opt = torch.optim.SGD(fc.parameters(), lr=0.1)
x = torch.tensor([[-6.0, 0.5, 1.0], [0.2, -5.0, 0.3]])
for _ in range(2):
    loss = (Spike.apply(fc(x) - 1.0) - 1.0).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_nan_made_in_a_custom_backward_names_its_gradient_line(run_script):
    res = run_script(SURROGATE)
    assert res.code == 0, res.err
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT825", marked_line(SURROGATE, "# <- cause")), res.findings


def test_returned_expression_names_the_return(run_script):
    src = SURROGATE.replace("        surrogate = g * ctx.k * e / (e + 1) ** 2  # <- cause\n"
                            "        return surrogate, None\n",
                            "        return g * ctx.k * e / (e + 1) ** 2, None  # <- cause\n")
    assert src != SURROGATE
    res = run_script(src)
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT825", marked_line(src, "# <- cause")), res.findings


def test_stable_surrogate_is_silent(run_script):
    src = SURROGATE.replace("e / (e + 1) ** 2", "torch.sigmoid(ctx.k * u) * torch.sigmoid(-ctx.k * u)")
    assert src != SURROGATE
    res = run_script(src)
    assert res.code == 0, res.err
    assert _first(res) is None, res.findings
