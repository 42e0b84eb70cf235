"""Session 51, helper recall51b: static facts that generalise (issue 13 part 3). Each fact: a
buggy twin reported on the cause's line and look-alikes, in words of no corpus."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _438(src: str) -> list[tuple[int, bool]]:
    """GT438's lines, each with whether its message points at the target (no_grad/detach)."""
    return [(f.line, "torch.no_grad()" in f.message) for f in check_source(
        textwrap.dedent(src)) if f.code == "GT438"]


# NOTE [output only a target]: a network run with grad on whose output is only what the loss
# fits the trained network to: GT438's advice is no_grad/detach, not "add it to the optimizer"
LOOP = '''
import torch
import torch.nn.functional as F
pupil = torch.nn.Linear(6, 3)
guide = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))
sgd = torch.optim.SGD(pupil.parameters(), lr=0.1)
for u, v in batches:
    {body}
    sgd.zero_grad()
    total.backward()
    sgd.step()
'''


def _loop(body: str) -> list[tuple[int, bool]]:
    return _438(LOOP.format(body=textwrap.indent(textwrap.dedent(body), "    ").strip()))


def test_guide_output_fitted_as_target():
    # reported at the run (the fix is there), the optimizer as related
    assert _loop("total = F.mse_loss(pupil(u), guide(u)) + F.cross_entropy(pupil(u), v)"
                 ) == [(8, True)]


def test_target_through_names_and_squared_difference():
    assert _loop("""
        aim = v + 0.5 * guide(u).max(1)[0].unsqueeze(1)
        got = pupil(u).gather(1, v)
        total = (got - aim).pow(2).mean()
        """) == [(8, True)]


def test_target_of_a_loss_module():
    assert _loop("""
        crit = torch.nn.KLDivLoss(reduction="batchmean")
        total = crit(F.log_softmax(pupil(u), 1), F.softmax(guide(u), 1))
        """) == [(9, True)]


def test_guide_on_the_prediction_side_keeps_the_plain_message():
    # a second head stacked on the trained one: it should be trained, add it to the optimizer
    assert _loop("total = F.mse_loss(guide(pupil(u)), v)") == [(6, False)]


def test_guide_also_in_a_term_of_its_own_keeps_the_plain_message():
    assert _loop("""
        soft = guide(u)
        total = F.mse_loss(pupil(u), soft) + 0.1 * soft.pow(2).mean()
        """) == [(6, False)]


def test_guide_fitted_to_data_keeps_the_plain_message():
    # the other side is a label, not a prediction: the guide's output is what is fitted
    assert _loop("total = (guide(u) - v).pow(2).mean() + F.mse_loss(pupil(u), v)") == [(6, False)]


def test_guide_under_no_grad_silent():
    assert _loop("""
        with torch.no_grad():
            soft = guide(u)
        total = F.mse_loss(pupil(u), soft)
        """) == []


KEPT = '''
import torch
import torch.nn.functional as F
class Fitter:
    def __init__(self):
        self.pupil = torch.nn.Linear(6, 3)
        self.guide = torch.nn.Linear(6, 3)
        self.opt = torch.optim.Adam(self.pupil.parameters())
    def fit(self, batches):
        for u in batches:
            {line}
            self.opt.zero_grad()
            total.backward()
            self.opt.step()
'''


def test_guide_kept_on_self_fitted_as_target():
    assert _438(KEPT.format(line="total = F.l1_loss(self.pupil(u), self.guide(u))")) == [(11, True)]


def test_guide_kept_on_self_stacked_keeps_the_plain_message():
    assert _438(KEPT.format(line="total = self.guide(self.pupil(u)).sum()")) == [(8, False)]


# NOTE [module run by its own method] + the target followed into a module's `forward`: a guide
# network handed to a training function, run there through a method of its class
HANDED = '''
import torch
import torch.nn.functional as F
class Guide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 4)
    def embed(self, u):
        return self.body(u)
class Pupil(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.core = torch.nn.Linear(6, 4)
        self.head = torch.nn.Linear(4, 2)
    def forward(self, u, v, hint):
        z = self.core(u)
        return F.cross_entropy(self.head(z), v) + {term}
def fit(net, batches, opt, guide):
    for u, v in batches:
        {run}
        total = net(u, v, hint)
        opt.zero_grad()
        total.backward()
        opt.step()
        print(f"{{total.item()}} {{hint.grad_fn}}")
guide = Guide().to("cpu")
net = Pupil()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
fit(net, batches, opt, guide)
print(len(list(guide.parameters())))
'''


def _handed(term="F.l1_loss(z, hint)", run="hint = guide.embed(u)") -> list[tuple[int, bool]]:
    return _438(HANDED.format(term=term, run=run))


def test_handed_guide_run_by_its_method_fitted_as_target():
    assert _handed() == [(20, True)]


def test_handed_guide_on_the_prediction_side_keeps_the_plain_message():
    # `hint` feeds the trained head's input: the guide is a forgotten part, reported at the optimizer
    assert _handed(term="F.l1_loss(self.head(z + hint), v.float()[:, None])") == [(28, False)]


def test_handed_guide_under_no_grad_silent():
    assert _handed(run="with torch.no_grad():\n            hint = guide.embed(u)") == []


def test_method_of_its_own_as_a_statement_is_not_a_run():
    # `guide.embed(u)` as a statement of its own, the hint made elsewhere: not a run
    assert _handed(run="guide.embed(u); hint = u[:, :4]") == []


def test_target_followed_into_a_helper_of_the_file():
    src = LOOP.replace("for u, v in batches:", '''def fit_to(a, aim):
    return F.smooth_l1_loss(a, aim)
for u, v in batches:''')
    body = "total = fit_to(pupil(u), guide(u))"
    assert _438(src.format(body=body)) == [(10, True)]
    # the helper fits the guide's output to the label: the plain reading
    assert _438(src.format(body="total = fit_to(guide(u), v) + fit_to(pupil(u), v)")) == [(6, False)]
