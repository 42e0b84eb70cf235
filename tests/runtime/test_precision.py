"""Correct code that looks like a gradient bug must produce no finding (precision first)."""
from __future__ import annotations

import pytest

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 1)
"""

CORRECT = {
    "accumulate_every_4": """
for i in range(8):
    loss = F.mse_loss(model(x), y) / 4
    loss.backward()
    if (i + 1) % 4 == 0:
        opt.step()
        opt.zero_grad()
""",
    "zero_grad_keep_tensors": """
for i in range(4):
    opt.zero_grad(set_to_none=False)
    F.mse_loss(model(x), y).backward()
    opt.step()
""",
    "model_zero_grad": """
for i in range(4):
    model.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
""",
    "manual_grad_zero": """
for i in range(4):
    F.mse_loss(model(x), y).backward()
    opt.step()
    for p in model.parameters():
        p.grad.zero_()
""",
    "validation_and_logging": """
total = 0.0
for i in range(4):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    total += loss.item()
    print(f"{loss:.3f}", float(loss.detach()))
model.eval()
with torch.no_grad():
    val = sum(F.mse_loss(model(x), y) for _ in range(3))
print(val.item(), model(x).detach().numpy().shape, model(x).tolist()[0])
""",
    "decorated_eval_and_inference_mode": """
@torch.no_grad()
def evaluate():
    return F.mse_loss(model(x), y).item()

@torch.inference_mode()
def predict():
    return model(x)

for i in range(3):
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
    evaluate()
    predict()
""",
    "rnn_hidden_detached": """
rnn = nn.GRU(4, 8, batch_first=True)
o2 = torch.optim.Adam(rnn.parameters())
h = torch.zeros(1, 2, 8)
for i in range(3):
    o2.zero_grad()
    out, h = rnn(torch.randn(2, 5, 4), h)
    h = h.detach()
    out.pow(2).mean().backward()
    o2.step()
""",
    "frozen_backbone_in_optimizer": """
backbone, head = nn.Linear(4, 8), nn.Linear(8, 1)
backbone.requires_grad_(False)
o2 = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.1)
for i in range(3):
    o2.zero_grad()
    F.mse_loss(head(torch.relu(backbone(x))), y).backward()
    o2.step()
""",
    "frozen_encoder_under_no_grad": """
enc, head = nn.Linear(4, 8), nn.Linear(8, 1)
o2 = torch.optim.SGD(head.parameters(), lr=0.1)
for i in range(3):
    with torch.no_grad():
        feats = enc(x)
    o2.zero_grad()
    F.mse_loss(head(feats), y).backward()
    o2.step()
""",
    "retain_graph_then_step": """
for i in range(3):
    opt.zero_grad()
    out = model(x)
    F.mse_loss(out, y).backward(retain_graph=True)
    out.abs().mean().backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
    opt.step()
""",
    "param_groups_and_scheduler": """
o2 = torch.optim.Adam([{"params": model[0].parameters(), "lr": 1e-3},
                       {"params": model[2].parameters()}], lr=1e-2)
sched = torch.optim.lr_scheduler.StepLR(o2, 1)
for i in range(3):
    o2.zero_grad()
    F.mse_loss(model(x), y).backward()
    o2.step()
    sched.step()
""",
    "lr_warmup_from_zero": """
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, step / 3))
for i in range(6):
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
    sched.step()
""",
    "custom_function_and_checkpoint": """
import torch.utils.checkpoint as cp

class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return 2 * a * g

for i in range(3):
    opt.zero_grad()
    h = cp.checkpoint(model, x, use_reentrant=False)
    Square.apply(h).mean().backward()
    opt.step()
""",
    "data_update_and_ema": """
w = torch.randn(3, requires_grad=True)
ema = w.detach().clone()
for i in range(3):
    loss = (w * 2).pow(2).sum()
    loss.backward()
    w.data -= 0.1 * w.grad.data
    w.grad = None
    ema.mul_(0.9).add_(w.detach(), alpha=0.1)
""",
    "gradient_penalty": """
for i in range(2):
    opt.zero_grad()
    xi = x.clone().requires_grad_(True)
    out = model(xi)
    g, = torch.autograd.grad(out.sum(), xi, create_graph=True)
    (out.mean() + g.pow(2).mean()).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_code_is_silent(run_script, name):
    res = run_script(PRELUDE + CORRECT[name])
    assert res.code == 0, res.err
    assert res.findings == [], res.err


BUGGY = {
    "zero_grad_once_per_epoch": ("""
for epoch in range(2):
    opt.zero_grad()  # <- here
    for i in range(3):
        F.mse_loss(model(x), y).backward()
        opt.step()
""", "GT502"),
    "unfrozen_after_optimizer": ("""
enc, head = nn.Linear(4, 8), nn.Linear(8, 1)
enc.requires_grad_(False)
o2 = torch.optim.SGD([p for p in list(enc.parameters()) + list(head.parameters())
                      if p.requires_grad], lr=0.1)
enc.requires_grad_(True)  # <- here
for i in range(3):
    o2.zero_grad()
    F.mse_loss(head(torch.relu(enc(x))), y).backward()
    o2.step()
""", "GT410"),
}


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_silent_bug_found(run_script, name):
    src, code = BUGGY[name]
    full = PRELUDE + src
    res = run_script(full)
    line = next(i for i, t in enumerate(full.lstrip("\n").splitlines(), 1) if "# <- here" in t)
    assert res.code == 0
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.err
