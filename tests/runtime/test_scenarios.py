"""More causes of each catalogued error (docs/pytorch-facts.md, the error sections): code and cause line."""
from __future__ import annotations

import pytest

HEAD = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
import numpy as np
m = nn.Linear(4, 1)
x, t = torch.randn(8, 4), torch.randn(8, 1)
"""

# name -> (code, body); the cause line carries `# C`
CASES = {
    'a7': ('GT102', """\
outs = [m(x[i:i+1]).sum() for i in range(3)]
loss = torch.tensor([o.item() for o in outs]).sum()  # C
loss.backward()
"""),
    'a8': ('GT204', """\
with torch.inference_mode():  # C: the with line (NOTE [ranking])
    out = m(x)
F.mse_loss(out, t).backward()
"""),
    'a_data': ('GT105', """\
out = m(x).data  # C
F.mse_loss(out, t).backward()
"""),
    'b2': ('GT305', """\
w = torch.randn(3, requires_grad=True).double()  # C
(w ** 2).sum().backward()
w.grad.zero_()
"""),
    'b3': ('GT801', """\
p = m.weight
p.grad.zero_()  # C
"""),
    'b4': ('GT801', """\
class M(nn.Module):
    def __init__(self):
        super().__init__(); self.used = nn.Linear(3, 1); self.unused = nn.Linear(3, 1)
    def forward(self, x): return self.used(x)
mm = M(); mm(torch.randn(2, 3)).sum().backward()
for p in mm.parameters(): p.grad.zero_()  # C
"""),
    'b5': ('GT801', """\
opt = torch.optim.SGD(m.parameters(), lr=0.1)
m(x).sum().backward(); opt.step(); opt.zero_grad()  # C
m.weight.grad.zero_()
"""),
    'b6': ('GT801', """\
m.bias.requires_grad_(False)  # C
m(x).sum().backward()
m.bias.grad.zero_()
"""),
    'c2': ('GT510', """\
m(x).backward()  # C
"""),
    'c3': ('GT510', """\
torch.stack([F.mse_loss(m(x[:4]), t[:4]), F.mse_loss(m(x[4:]), t[4:])]).backward()  # C
"""),
    'c4': ('GT510', """\
torch.autograd.grad(m(x), m.weight)  # C
"""),
    'd1': ('GT507', """\
w = torch.randn(3, requires_grad=True)
h = w.exp()  # C
l1, l2 = h.sum(), (h * 2).sum()
l1.backward(); l2.backward()
"""),
    'd3': ('GT507', """\
enc, head = nn.Linear(4, 4), nn.Linear(4, 1)
feats = enc(torch.randn(8, 4))  # C
for step in range(2):
    head(feats).sum().backward()
"""),
    'd5': ('GT506', """\
w = torch.randn(3, requires_grad=True); total = 0
for step in range(2):
    total = total + w.exp().sum()  # C
    total.backward()
"""),
    'e2': ('GT602', """\
xx = torch.randn(3, requires_grad=True)
y = xx.exp()
y += 1  # C
y.sum().backward()
"""),
    'e3': ('GT602', """\
xx = torch.randn(3, requires_grad=True)
y = nn.ReLU(inplace=True)(torch.sigmoid(xx))  # C
y.sum().backward()
"""),
    'e4': ('GT601', """\
mm = nn.Linear(3, 3); opt = torch.optim.SGD(mm.parameters(), lr=0.1)
h = mm(torch.randn(2, 3)); out = mm(h)
l1, l2 = out.sum(), out.pow(2).sum()
l1.backward(retain_graph=True); opt.step()  # C
l2.backward()
"""),
    'e5': ('GT602', """\
xx = torch.randn(4, requires_grad=True)
y = xx * 1; z = y ** 2
y[0] = 0  # C
z.sum().backward()
"""),
    'f2': ('GT302', """\
m.weight.fill_(0.0)  # C
"""),
    'f3': ('GT302', """\
w = torch.randn(3, requires_grad=True)
w[0] = 1.0  # C
"""),
    'g2': ('GT101', """\
loss = float(F.mse_loss(m(x), t))  # C
loss.backward()
"""),
    'g3': ('GT101', """\
loss = sum(l.item() for l in (F.mse_loss(m(x), t), F.l1_loss(m(x), t)))  # C
loss.backward()
"""),
    'g4': ('GT101', """\
loss = np.mean((m(x).detach().numpy() - t.numpy()) ** 2)  # C
loss.backward()
"""),
    'g6': ('GT101', """\
import math
loss = math.sqrt(F.mse_loss(m(x), t))  # C
loss.backward()
"""),
    'i2': ('GT807', """\
out = m(x)
arr = np.asarray(out)  # C
"""),
    'i3': ('GT807', """\
m.weight.numpy()  # C
"""),
    'l2': ('GT511', """\
loss = F.mse_loss(m(x), t)
loss = loss.backward()  # C
print(f'loss {loss.item()}')
"""),
    'l3': ('GT511', """\
opt = torch.optim.SGD(m.parameters(), lr=0.1)
opt = opt.zero_grad()  # C
opt.step()
"""),
    'l4': ('GT511', """\
mm = nn.Linear(4, 1)
mm = mm.load_state_dict(nn.Linear(4, 1).state_dict())  # C
mm(x)
"""),
    'l5': ('GT511', """\
opt = torch.optim.SGD(m.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 1)
opt.step(); sched = sched.step()  # C
sched.step()
"""),
    'n4': ('GT204', """\
with torch.inference_mode():  # C
    tt = torch.zeros(3)
tt.add_(1)
"""),
    'empty': ('GT809', """\
opt = torch.optim.SGD([], lr=0.1)  # C
"""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cause_line_and_code(run_script, name):
    code, body = CASES[name]
    src = HEAD + "\n" + body
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "# C" in t)
    res = run_script(src)
    assert res.code == 1, res.err
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.err


def test_inplace_names_the_op_that_saved_the_tensor(run_script):
    res = run_script("""
        import torch
        x = torch.randn(4, requires_grad=True)
        y = x * 1
        z = y ** 2
        y[0] = 0
        z.sum().backward()
    """)
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT602", 5), res.err
    related = {(r["line"], r["message"]) for r in first["related"]}
    assert (3, "the tensor was created here") in related
    assert (4, "this op saved it for backward") in related
