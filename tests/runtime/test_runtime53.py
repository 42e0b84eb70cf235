"""runtime53 on real torch, one process, a few steps, tiny models: the cause's line first.

- An optimizer built by a helper over the modules its caller hands it, a model with a layer it
  never calls: the embeddings left out get gradients and no step; named at the caller's call
  that chose the modules (NOTE [optimizer over what a caller handed in]), as parameters in no
  optimizer, not as a re-created model (NOTE [unused layer of a model that ran]). Look-alike:
  the embeddings handed in too.
- A plain class one of whose instance methods ran: its `__init__` ran too, so a static finding
  there is on code that ran (NOTE [constructed before its method ran]; the realworld pytorch_ts
  predictor's GT540). Look-alikes: a static method, a one-line method.
- A projection onto a silent target's energy (GT139) explains the non-finite gradient the run
  sees at backward(); a target captured with its graph (GT528) explains a backward through a
  freed graph; a retained graph read after the other optimizer's step (static GT601 at the
  step) leads over the run's read. Look-alikes: the epsilon, the detached target, the step
  after the backward.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")


def _codes(res: object) -> list[tuple[str, int]]:
    return [(f["code"], f["line"]) for f in res.findings]  # type: ignore[attr-defined]


HANDED = """
import torch
from torch import nn
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 1)

    def forward(self, x, a):
        return self.body(x) + a


def get_parameters(models):
    params = []
    for m in models:
        params += list(m.parameters())
    return params


def get_optimizer(models):
    params = get_parameters(models)
    return torch.optim.Adam(params, lr=0.01)


class System(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()
        self.emb = nn.Embedding(8, 4)

    def configure(self):
        self.optimizer = get_optimizer(MODELS)  # <- cause
        return self.optimizer


system = System()
opt = system.configure()
for step in range(3):
    ts = torch.randint(0, 8, (16,))
    loss = system.net(torch.randn(16, 4), system.emb(ts)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_optimizer_helper_over_handed_modules_names_the_choice(run_script):
    src = HANDED.replace("MODELS", "[self.net]")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT821", marked_line(src))], res.findings
    assert "re-created" not in res.findings[0]["message"]


def test_optimizer_helper_handed_every_module_is_silent(run_script):
    res = run_script(HANDED.replace("MODELS", "[self.net, self.emb]"))
    assert res.code == 0, res.err
    assert not {"GT821", "GT404"} & {c for c, _ in _codes(res)}, res.findings


PREDICTOR = """
class Predictor:
    def __init__(self, net):
        self.net = net

    def predict(self, x):
        out = self.net(x)
        return out

    @staticmethod
    def make(net):
        return Predictor(net)

    def name(self): return "p"
"""


@pytest.mark.parametrize("method,init_ran", [
    ("predict", True),  # an instance method ran: the instance was built
    ("make", False),  # a static method says nothing of an instance
    ("name", False),  # a one-line method's span is a line of the class body
])
def test_init_ran_when_an_instance_method_ran(tmp_path, method, init_ran):
    import ast as _ast

    from gradtrace.runtime.ran import scripted_spans

    path = tmp_path / "pred.py"
    path.write_text(PREDICTOR.lstrip("\n"), encoding="utf-8")
    fn = next(n for n in _ast.walk(_ast.parse(path.read_text()))
              if isinstance(n, _ast.FunctionDef) and n.name == method)
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    ran = {str(path): [(1, 1), (first, fn.end_lineno)]}  # the class line, the method
    scripted_spans(ran)
    assert any(a <= 3 <= b and b > a for a, b in ran[str(path)]) is init_ran  # `self.net = net`


SISDR = """
import torch
from torch import nn
torch.manual_seed(0)


def si_sdr(est, target):
    alpha = (est * target).sum(-1, keepdim=True) / (ENERGY)  # <- cause
    proj = alpha * target
    ratio = proj.pow(2).sum(-1) / (est - proj).pow(2).sum(-1).clamp(min=1e-8)
    return -(ratio + 1e-8).log().mean()


net = nn.Linear(16, 16)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
target = torch.randn(4, 16)
target[1] = 0.0
for step in range(2):
    loss = si_sdr(net(torch.randn(4, 16)), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_projection_onto_silent_target_leads_the_nonfinite_gradient(run_script):
    src = SISDR.replace("ENERGY", "target.pow(2).sum(-1, keepdim=True)")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [line for _, line in _codes(res)[:1]] == [marked_line(src)], res.findings
    assert res.findings[0]["source"] == "static+runtime"  # GT139 explains the non-finite
    assert "GT139" in str(res.findings[0]), res.findings


def test_projection_with_epsilon_is_silent(run_script):
    res = run_script(SISDR.replace("ENERGY", "target.pow(2).sum(-1, keepdim=True) + 1e-8"))
    assert res.code == 0, res.err
    assert _codes(res) == [], res.findings


CAPTURE = """
import torch
from torch import nn
torch.manual_seed(0)


class StyleLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "capture"
        self.targets = []
        self.crit = nn.MSELoss()

    def forward(self, x):
        gram = x.t() @ x
        if self.mode == "capture":
            self.targets.append(gram.mul(0.5)KEEP)  # <- cause
        else:
            self.loss = self.crit(gram, self.targets[0])
        return x


features = nn.Linear(4, 4)
style = StyleLoss()
style(features(torch.randn(3, 4)))
style.mode = "loss"
img = torch.randn(3, 4, requires_grad=True)
opt = torch.optim.LBFGS([img], max_iter=2)


def closure():
    opt.zero_grad()
    style(features(img))
    style.loss.backward()
    return style.loss


opt.step(closure)
"""


def test_target_captured_with_its_graph_leads_the_second_backward(run_script, tmp_path):
    src = CAPTURE.replace("KEEP", "")
    res = run_script(src)
    assert res.code != 0
    assert _codes(res)[:1] == [("GT528", marked_line(src))], res.findings


def test_target_captured_detached_is_silent(run_script):
    res = run_script(CAPTURE.replace("KEEP", ".detach()"))
    assert res.code == 0, res.err
    assert _codes(res) == [], res.findings


KEPT = """
import torch
from torch import nn
torch.manual_seed(0)


class Disc(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.c = nn.Linear(4, 4)
        self.b = nn.Linear(4, 1)

    def forward(self, x):
        h = self.c(self.a(x).relu())
        return self.b(h), h


G = nn.Linear(4, 4)
D = Disc()
opt_g = torch.optim.Adam(G.parameters(), lr=0.01)
opt_d = torch.optim.Adam(D.parameters(), lr=0.01)
for step in range(2):
    opt_g.zero_grad()
    opt_d.zero_grad()
    x = torch.randn(8, 4)
    out = G(x)
    logit_real, feat_real = D(x)
    loss_d = (logit_real.mean() - D(out.detach())[0].mean())
    loss_d.backward(retain_graph=True)
    opt_d.step()  # <- cause
    logit_fake, feat_fake = D(out)
    loss_g = -logit_fake.mean() + (feat_fake - feat_real).abs().mean()
    loss_g.backward()
    opt_g.step()
"""


def test_retained_graph_read_after_the_step_names_the_step(run_script):
    res = run_script(KEPT)
    assert res.code != 0
    assert _codes(res)[:1] == [("GT601", marked_line(KEPT))], res.findings


def test_step_after_the_last_backward_is_silent(run_script):
    src = KEPT.replace("    opt_d.step()  # <- cause\n", "").replace(
        "    opt_g.step()\n", "    opt_g.step()\n    opt_d.step()\n")
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT601" not in {c for c, _ in _codes(res)}, res.findings


OWN = """
import torch
from torch import nn
torch.manual_seed(0)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model[0].parameters(), lr=0.1)  # <- cause

    def fit(self):
        for step in range(3):
            loss = self.model(torch.randn(8, 4)).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


Trainer(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))).fit()
"""


def test_method_building_its_own_optimizer_keeps_its_line(run_script):
    res = run_script(OWN)  # a method over a handed model: not a helper the caller chose for
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT821", marked_line(OWN))], res.findings
