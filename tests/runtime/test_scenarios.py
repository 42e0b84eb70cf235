"""More causes of each catalogued error (PYTORCH_FACTS.md §2 a-n): code and cause line."""
from __future__ import annotations

import pytest

HEAD = 'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport numpy as np\nm = nn.Linear(4, 1)\nx, t = torch.randn(8, 4), torch.randn(8, 1)\n'

# name -> (code, body); the cause line carries `# C`
CASES = {
    'a7': ('GT104', 'outs = [m(x[i:i+1]).sum() for i in range(3)]\nloss = torch.tensor([o.item() for o in outs]).sum()  # C\nloss.backward()\n'),
    'a8': ('GT204', 'with torch.inference_mode():\n    out = m(x)  # C\nF.mse_loss(out, t).backward()\n'),
    'a_data': ('GT105', 'out = m(x).data  # C\nF.mse_loss(out, t).backward()\n'),
    'b2': ('GT305', 'w = torch.randn(3, requires_grad=True).double()  # C\n(w ** 2).sum().backward()\nw.grad.zero_()\n'),
    'b3': ('GT801', 'p = m.weight\np.grad.zero_()  # C\n'),
    'b4': ('GT801', 'class M(nn.Module):\n    def __init__(self):\n        super().__init__(); self.used = nn.Linear(3, 1); self.unused = nn.Linear(3, 1)\n    def forward(self, x): return self.used(x)\nmm = M(); mm(torch.randn(2, 3)).sum().backward()\nfor p in mm.parameters(): p.grad.zero_()  # C\n'),
    'b5': ('GT801', 'opt = torch.optim.SGD(m.parameters(), lr=0.1)\nm(x).sum().backward(); opt.step(); opt.zero_grad()  # C\nm.weight.grad.zero_()\n'),
    'b6': ('GT801', 'm.bias.requires_grad_(False)  # C\nm(x).sum().backward()\nm.bias.grad.zero_()\n'),
    'c2': ('GT510', 'm(x).backward()  # C\n'),
    'c3': ('GT510', 'torch.stack([F.mse_loss(m(x[:4]), t[:4]), F.mse_loss(m(x[4:]), t[4:])]).backward()  # C\n'),
    'c4': ('GT510', 'torch.autograd.grad(m(x), m.weight)  # C\n'),
    'd1': ('GT507', 'w = torch.randn(3, requires_grad=True)\nh = w.exp()  # C\nl1, l2 = h.sum(), (h * 2).sum()\nl1.backward(); l2.backward()\n'),
    'd3': ('GT507', 'enc, head = nn.Linear(4, 4), nn.Linear(4, 1)\nfeats = enc(torch.randn(8, 4))  # C\nfor step in range(2):\n    head(feats).sum().backward()\n'),
    'd5': ('GT506', 'w = torch.randn(3, requires_grad=True); total = 0\nfor step in range(2):\n    total = total + w.exp().sum()  # C\n    total.backward()\n'),
    'e2': ('GT602', 'xx = torch.randn(3, requires_grad=True)\ny = xx.exp()\ny += 1  # C\ny.sum().backward()\n'),
    'e3': ('GT602', 'xx = torch.randn(3, requires_grad=True)\ny = nn.ReLU(inplace=True)(torch.sigmoid(xx))  # C\ny.sum().backward()\n'),
    'e4': ('GT601', 'mm = nn.Linear(3, 3); opt = torch.optim.SGD(mm.parameters(), lr=0.1)\nh = mm(torch.randn(2, 3)); out = mm(h)\nl1, l2 = out.sum(), out.pow(2).sum()\nl1.backward(retain_graph=True); opt.step()  # C\nl2.backward()\n'),
    'e5': ('GT602', 'xx = torch.randn(4, requires_grad=True)\ny = xx * 1; z = y ** 2\ny[0] = 0  # C\nz.sum().backward()\n'),
    'f2': ('GT302', 'm.weight.fill_(0.0)  # C\n'),
    'f3': ('GT302', 'w = torch.randn(3, requires_grad=True)\nw[0] = 1.0  # C\n'),
    'g2': ('GT101', 'loss = float(F.mse_loss(m(x), t))  # C\nloss.backward()\n'),
    'g3': ('GT101', 'loss = sum(l.item() for l in (F.mse_loss(m(x), t), F.l1_loss(m(x), t)))  # C\nloss.backward()\n'),
    'g4': ('GT101', 'loss = np.mean((m(x).detach().numpy() - t.numpy()) ** 2)  # C\nloss.backward()\n'),
    'g6': ('GT101', 'import math\nloss = math.sqrt(F.mse_loss(m(x), t))  # C\nloss.backward()\n'),
    'i2': ('GT807', 'out = m(x)\narr = np.asarray(out)  # C\n'),
    'i3': ('GT807', 'm.weight.numpy()  # C\n'),
    'l2': ('GT511', "loss = F.mse_loss(m(x), t)\nloss = loss.backward()  # C\nprint(f'loss {loss.item()}')\n"),
    'l3': ('GT511', 'opt = torch.optim.SGD(m.parameters(), lr=0.1)\nopt = opt.zero_grad()  # C\nopt.step()\n'),
    'l4': ('GT511', 'mm = nn.Linear(4, 1)\nmm = mm.load_state_dict(nn.Linear(4, 1).state_dict())  # C\nmm(x)\n'),
    'l5': ('GT511', 'opt = torch.optim.SGD(m.parameters(), lr=0.1)\nsched = torch.optim.lr_scheduler.StepLR(opt, 1)\nopt.step(); sched = sched.step()  # C\nsched.step()\n'),
    'n4': ('GT204', 'with torch.inference_mode():\n    tt = torch.zeros(3)  # C\ntt.add_(1)\n'),
    'empty': ('GT809', 'opt = torch.optim.SGD([], lr=0.1)  # C\n'),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cause_line_and_code(run_script, name):
    code, body = CASES[name]
    src = HEAD + body
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "# C" in t)
    res = run_script(src)
    assert res.code == 1, res.err
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.err
