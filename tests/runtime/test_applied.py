"""What a step applies against the gradient it finds (issue #13, held-out misses CURL#28,
pytorch#38581, PENet): one gradient applied by two optimizers (GT406 at run time, NOTE [one
gradient, two steps]), weight decay moving a parameter whose gradient is always zero (GT870,
NOTE [decay without a gradient]) and per-group learning rates overwritten by one value before
the first step (GT871, NOTE [group learning rates erased]; PENet). Buggy twins in spellings
other than the real-world cases, and correct look-alikes that must stay silent. Real torch,
in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def batches(n=4):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g))
            for _ in range(n)]
"""

BUGS = {
    # two optimizers over the same model, both stepped after each backward (a tie: the one
    # that steps second is named)
    "two_optimizers_same_model": ("GT406", """
def fit(model):
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)  # <- cause
    for x, y in batches():
        sgd.zero_grad()
        adam.zero_grad()
        F.cross_entropy(model(x), y).backward()
        sgd.step()
        adam.step()

fit(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)))
"""),
    # a head optimizer built from a list that also takes the shared trunk, which has its own
    # optimizer; stepped from a trainer method (the head's optimizer holds the trunk as a part)
    "head_optimizer_takes_trunk_too": ("GT406", """
class Trainer:
    def __init__(self):
        self.trunk = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)
        self.opts = {
            "trunk": torch.optim.SGD(self.trunk.parameters(), lr=0.1),
            "head": torch.optim.SGD([*self.head.parameters(), *self.trunk.parameters()], lr=0.1),  # <- cause
        }

    def train_step(self, x, y):
        for o in self.opts.values():
            o.zero_grad()
        F.cross_entropy(self.head(torch.relu(self.trunk(x))), y).backward()
        self.opts["head"].step()
        self.opts["trunk"].step()

t = Trainer()
for x, y in batches():
    t.train_step(x, y)
"""),
    # gradients of a frozen layer zeroed by hand before an AdamW step (decoupled decay)
    "grads_zeroed_before_adamw_step": ("GT870", """
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)  # <- cause
for x, y in batches(6):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    for p in model[0].parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
"""),
    # a hook multiplying the gradient by a zero mask, Adam with coupled L2 decay, built in a
    # helper
    "zero_mask_hook_adam_l2": ("GT870", """
def make_optimizer(params):
    return torch.optim.Adam(params, lr=1e-3, weight_decay=1e-2)  # <- cause

backbone, head = nn.Linear(6, 8), nn.Linear(8, 3)
mask = torch.zeros(8, 6)
backbone.weight.register_hook(lambda g: g * mask)
opt = make_optimizer([*backbone.parameters(), *head.parameters()])
for x, y in batches(6):
    opt.zero_grad()
    F.cross_entropy(head(torch.relu(backbone(x))), y).backward()
    opt.step()
"""),
    # a warm-up in a trainer method writes one rate into every group before the first step
    "warmup_method_overwrites_group_rates": ("GT871", """
class Trainer:
    def __init__(self):
        self.enc, self.dec = nn.Linear(6, 8), nn.Linear(8, 3)
        self.opt = torch.optim.SGD([{"params": self.enc.parameters(), "lr": 1e-3},
                                    {"params": self.dec.parameters(), "lr": 1e-2}], lr=1e-2)

    def warmup(self, it, total=10):
        new_lr = 1e-2 * (it + 1) / total
        for group in self.opt.param_groups:
            group["lr"] = new_lr  # <- cause

    def fit(self):
        for it, (x, y) in enumerate(batches()):
            self.warmup(it)
            self.opt.zero_grad()
            F.cross_entropy(self.dec(torch.relu(self.enc(x))), y).backward()
            self.opt.step()

Trainer().fit()
"""),
    # the rate written with dict.update (no `['lr'] =` store to point at): the optimizer's line
    "update_call_overwrites_group_rates": ("GT871", """
backbone, head = nn.Linear(6, 8), nn.Linear(8, 3)
opt = torch.optim.AdamW([{"params": backbone.parameters(), "lr": 1e-4},  # <- cause
                         {"params": head.parameters(), "lr": 1e-3}])
for pg in opt.param_groups:
    pg.update(lr=5e-4)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(head(torch.relu(backbone(x))), y).backward()
    opt.step()
"""),
}

LOOKALIKES = {
    # per-group rates scaled each by its own base; a scheduler over per-group rates; groups
    # that differ only in weight decay set to one rate
    "group_rates_kept": """
backbone, head = nn.Linear(6, 8), nn.Linear(8, 3)
opt = torch.optim.SGD([{"params": backbone.parameters(), "lr": 1e-3},
                       {"params": head.parameters(), "lr": 1e-2}], lr=1e-2)
bases = [g["lr"] for g in opt.param_groups]
for g, base in zip(opt.param_groups, bases):
    g["lr"] = base * 0.5
other = nn.Linear(6, 3)
opt2 = torch.optim.SGD([{"params": [other.weight], "lr": 1e-3},
                        {"params": [other.bias], "lr": 1e-2}], lr=1e-2)
sched = torch.optim.lr_scheduler.LambdaLR(opt2, lambda s: 0.9 ** s)
wd = nn.Linear(6, 3)
opt3 = torch.optim.AdamW([{"params": [wd.weight], "weight_decay": 0.01},
                          {"params": [wd.bias], "weight_decay": 0.0}], lr=1e-3)
for g in opt3.param_groups:
    g["lr"] = 5e-4
for x, y in batches():
    for o in (opt, opt2, opt3):
        o.zero_grad()
    (F.cross_entropy(head(torch.relu(backbone(x))), y) + F.cross_entropy(other(x), y)
     + F.cross_entropy(wd(x), y)).backward()
    for o in (opt, opt2, opt3):
        o.step()
    sched.step()
""",
    # two optimizers over one model, stepped in two phases (each after its own backward)
    "phases": """
model = nn.Linear(6, 3)
warm = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches(3):
    warm.zero_grad()
    F.cross_entropy(model(x), y).backward()
    warm.step()
fine = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y in batches(3):
    fine.zero_grad()
    F.cross_entropy(model(x), y).backward()
    fine.step()
""",
    # a shared encoder trained by two losses in turn, one optimizer per loss
    "alternating_losses_share_encoder": """
enc, cls, rec = nn.Linear(6, 8), nn.Linear(8, 3), nn.Linear(8, 6)
opt_cls = torch.optim.SGD([*enc.parameters(), *cls.parameters()], lr=0.1)
opt_rec = torch.optim.SGD([*enc.parameters(), *rec.parameters()], lr=0.1)
for x, y in batches():
    opt_cls.zero_grad()
    F.cross_entropy(cls(enc(x)), y).backward()
    opt_cls.step()
    opt_rec.zero_grad()
    F.mse_loss(rec(enc(x)), x).backward()
    opt_rec.step()
""",
    # a wrapper optimizer (Lookahead-like) stepping the optimizer it wraps; a GAN-like pair
    # of optimizers over disjoint modules after one backward
    "wrapper_and_disjoint_pair": """
class Lookahead(torch.optim.Optimizer):
    def __init__(self, inner, k=2):
        self.inner, self.k, self.n = inner, k, 0
        super().__init__(inner.param_groups, dict(inner.defaults))

    @torch.no_grad()
    def step(self, closure=None):
        self.inner.step()
        self.n += 1

model = nn.Linear(6, 3)
opt = Lookahead(torch.optim.SGD(model.parameters(), lr=0.1))
a, b = nn.Linear(6, 8), nn.Linear(8, 3)
opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
opt_b = torch.optim.Adam(b.parameters(), lr=1e-3)
for x, y in batches():
    opt.zero_grad()
    opt_a.zero_grad()
    opt_b.zero_grad()
    (F.cross_entropy(model(x), y) + F.cross_entropy(b(torch.relu(a(x))), y)).backward()
    opt.step()
    opt_a.step()
    opt_b.step()
""",
    # frozen the right way under weight decay; a zeroing hook without weight decay
    "frozen_by_requires_grad_and_undecayed_zero_hook": """
backbone, head = nn.Linear(6, 8), nn.Linear(8, 3)
backbone.requires_grad_(False)
opt = torch.optim.AdamW([*backbone.parameters(), *head.parameters()], lr=1e-2, weight_decay=0.1)
other = nn.Linear(6, 3)
other.bias.register_hook(lambda g: torch.zeros_like(g))
opt2 = torch.optim.Adam(other.parameters(), lr=1e-2)
for x, y in batches(6):
    opt.zero_grad()
    opt2.zero_grad()
    (F.cross_entropy(head(torch.relu(backbone(x))), y) + F.cross_entropy(other(x), y)).backward()
    opt.step()
    opt2.step()
""",
    # the DDP idiom for an unused head: its parameters kept in the loss as 0 * sum, decayed
    "unused_head_kept_in_loss_times_zero": """
body, head, spare = nn.Linear(6, 8), nn.Linear(8, 3), nn.Linear(8, 3)
params = [*body.parameters(), *head.parameters(), *spare.parameters()]
opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)
for x, y in batches(6):
    opt.zero_grad()
    loss = F.cross_entropy(head(torch.relu(body(x))), y)
    (loss + 0.0 * sum(p.sum() for p in spare.parameters())).backward()
    opt.step()
""",
    # LoRA: B starts at zero, so A's gradient is zero at the first step only
    "lora_zero_init_b": """
class LoRA(nn.Module):
    def __init__(self, d=6, r=2, out=3):
        super().__init__()
        self.base = nn.Linear(d, out)
        self.base.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(r, d) * 0.1)
        self.B = nn.Parameter(torch.zeros(out, r))

    def forward(self, x):
        return self.base(x) + x @ self.A.t() @ self.B.t()

model = LoRA()
opt = torch.optim.AdamW([model.A, model.B], lr=1e-2, weight_decay=0.01)
for x, y in batches(6):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
}

WATCHED = {"GT406", "GT870", "GT871"}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_named_at_its_cause(name, run_script):
    code, body = BUGS[name]
    src = HEAD + body
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"], first["path"]) == (code, marked_line(src), "prog.py"), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_stays_silent(name, run_script):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert not WATCHED & set(res.codes()), res.findings


BITS = """
import torch
import torch.nn.functional as F

def train():
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    a = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=0.1)
    b = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.bias.register_hook(lambda g: g * 0)
    for _ in range(6):
        x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
        a.zero_grad()
        b.zero_grad()
        F.cross_entropy(model(x), y).backward()
        a.step()
        b.step()
    return [p.detach().clone() for p in model.parameters()]
"""


def test_training_bits_unchanged(tmp_path):
    """The audit reads gradients and parameters only: the same weights with and without it
    (the training code lives in its own file: this test file is not the program)."""
    import runpy

    import torch

    import gradtrace

    path = tmp_path / "bits.py"
    path.write_text(BITS, encoding="utf-8")
    train = runpy.run_path(str(path))["train"]
    plain = train()
    with gradtrace.trace() as tr:
        traced = train()
    assert all(torch.equal(p, q) for p, q in zip(plain, traced))
    assert {"GT406", "GT870"} <= {f.code for f in tr.findings}
