"""Session-29 run-time diagnoses of silent bugs (docs/triage/runtime29b.md):

- ``autograd.grad`` of a tensor with respect to itself after an in-place op rewrote it
  (NOTE [input rewritten into the output]): GT865 at the in-place write;
- a model only evaluated, never put in eval mode, whose dropout drops at every call
  (NOTE [evaluated as loaded, in train mode]): GT874 at the line that made the model;
- a mean teacher / EMA copy refreshed from the parameters only, its normalisation statistics
  never moving (NOTE [average that skips the statistics]): GT866 at the averaging loop;
- GT821's message when the optimizer that steps was built after the unheld parameters.

Buggy twins (code + line asserted), silent look-alikes, and a variant the cases do not show.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _first(res):
    found = [f for f in res.findings if f["source"] != "static"]
    return (found[0]["code"], found[0]["line"]) if found else None


def _codes(res, code):
    return [f for f in res.findings if f["source"] != "static" and f["code"] == code]


# --- NOTE [input rewritten into the output] ------------------------------------------------

def test_torch_gives_ones_for_the_gradient_of_a_rewritten_input():
    """The fact the finding states, on real torch: relu_ returns its input, and the gradient
    of x with respect to itself is 1 where relu's derivative is 0."""
    x = torch.tensor([-1.0]).requires_grad_().clone()
    out = F.relu_(x)
    assert out is x
    assert torch.autograd.grad(out, (x,))[0].item() == 1.0
    y = torch.tensor([-1.0]).requires_grad_().clone()
    assert torch.autograd.grad(F.relu(y), (y,))[0].item() == 0.0


# twin: the case's shape, the write inline in the grad call
INLINE = HEAD + """
x = torch.tensor([-1.0, 2.0]).requires_grad_().clone()
g = torch.autograd.grad(F.relu_(x), (x,), grad_outputs=torch.ones(2))[0]  # <- cause
print(g)
"""

# variant: a method-form write in a helper, the gradient asked by the caller on its input
HELPER = HEAD + """
def squash(t):
    return t.tanh_()  # <- cause


w = nn.Parameter(torch.randn(3, 3))
for _ in range(2):
    h = torch.randn(4, 3) @ w
    dh = torch.autograd.grad(squash(h), h, grad_outputs=torch.ones(4, 3), retain_graph=True)[0]
    print(dh.abs().max().item())
"""

# look-alike: the out-of-place op, and an output computed after the write (a new tensor)
OUT_OF_PLACE = HEAD + """
x = torch.tensor([-1.0, 2.0]).requires_grad_().clone()
print(torch.autograd.grad(F.relu(x), (x,), grad_outputs=torch.ones(2))[0])
h = torch.randn(4, 3, requires_grad=True).clone()
h.relu_()
print(torch.autograd.grad((h * h).sum(), h)[0])
"""


def test_gradient_of_an_input_relu_rewrote_names_the_write(run_script):
    res = run_script(INLINE)
    assert _first(res) == ("GT865", marked_line(INLINE)), res.err


def test_gradient_of_an_input_a_helper_rewrote_names_the_helper_write(run_script):
    res = run_script(HELPER)
    assert _first(res) == ("GT865", marked_line(HELPER)), res.err


def test_gradient_of_a_new_tensor_is_silent(run_script):
    res = run_script(OUT_OF_PLACE)
    assert res.code == 0, res.err
    assert _codes(res, "GT865") == [], res.err


# --- GT821's message when the optimizer that steps came after the new parameters ------------

# the optimizer of the second run is built after the new network, from the parameter list the
# first network left (opensoundscape's loaded optimizer_params)
OLD_LIST = HEAD + """
class Runner:
    def __init__(self):
        self.net = nn.Linear(6, 2)
        self.opt_args = {"params": list(self.net.parameters()), "lr": 0.1}

    def fit(self, x, y):
        opt = torch.optim.SGD(**self.opt_args)
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(self.net(x), y).backward()
            opt.step()


x, y = torch.randn(16, 6), torch.randint(0, 2, (16,))
first = Runner()
first.fit(x, y)
second = Runner()
second.opt_args = first.opt_args
second.fit(x, y)
"""

# look-alike: a parameter a helper adds after the one optimizer was built (nothing built later)
ADDED = HEAD + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        out = self.fc(x)
        return out * self.scale if hasattr(self, "scale") else out


def add_scale(m):
    m.scale = nn.Parameter(torch.ones(1))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
add_scale(model)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 6)).pow(2).mean().backward()
    opt.step()
"""


def test_optimizer_built_later_from_an_old_list_is_said_so(run_script):
    res = run_script(OLD_LIST)
    found = _codes(res, "GT821")
    assert found, res.err
    assert "built after them" in found[0]["message"], res.err
    assert "added to the model here, after the optimizer" not in found[0]["message"], res.err


def test_parameter_added_after_the_only_optimizer_is_not_said_built_later(run_script):
    # the run's GT821 stands alone or confirms the static GT404 on the helper's new Parameter
    # (session 53: a helper making a Parameter on its argument after the optimizer)
    res = run_script(ADDED)
    found = _codes(res, "GT821") or [f for f in _codes(res, "GT404") if any(
        "(GT821)" in r["message"] for r in f["related"])]
    assert found, res.err
    assert "built after them" not in res.err, res.err


# --- NOTE [evaluated as loaded, in train mode] -----------------------------------------------

def test_torch_modules_start_in_train_mode_and_dropout_drops_under_no_grad():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    assert m.training
    x = torch.randn(8, 4)
    with torch.no_grad():
        assert not torch.equal(m(x), m(x))
    m.eval()
    with torch.no_grad():
        assert torch.equal(m(x), m(x))


EVAL_ONLY = HEAD + """
def load(name):
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 4))


def score(model, batches):
    with torch.no_grad():
        return torch.cat([model(b) for b in batches])


model = load("base"){fix}  # <- cause
batches = [torch.randn(4, 8) for _ in range(3)]
print(torch.equal(score(model, batches), score(model, batches)))
"""

# variant: features extracted in a function, under inference_mode, the model built inline
FEATURES = HEAD + """
def main():
    encoder = nn.Sequential(nn.Conv1d(2, 4, 3), nn.ReLU(), nn.Dropout1d(0.2), nn.Flatten())  # <- cause
    feats = []
    for _ in range(3):
        with torch.inference_mode():
            feats.append(encoder(torch.randn(5, 2, 10)))
    print(torch.cat(feats).shape)


main()
"""

# look-alike: Monte-Carlo dropout, the mode set on purpose
MC_DROPOUT = HEAD + """
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))
model.train()
x = torch.randn(4, 8)
with torch.no_grad():
    samples = torch.stack([model(x) for _ in range(20)])
print(samples.std(0).mean().item())
"""

# look-alike: evaluated once before training starts (an optimizer exists by the end)
BEFORE_TRAINING = HEAD + """
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))
x, y = torch.randn(16, 8), torch.randn(16, 1)
with torch.no_grad():
    print([nn.functional.mse_loss(model(x), y).item() for _ in range(2)])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""


def test_model_evaluated_as_loaded_names_the_load(run_script):
    src = EVAL_ONLY.format(fix="")
    res = run_script(src)
    assert _first(res) == ("GT874", marked_line(src)), res.err


def test_encoder_built_in_a_function_and_only_evaluated_variant(run_script):
    res = run_script(FEATURES)
    assert _first(res) == ("GT874", marked_line(FEATURES)), res.err


def test_model_put_in_eval_after_loading_is_silent(run_script):
    res = run_script(EVAL_ONLY.format(fix="\nmodel.eval()"))
    assert res.code == 0, res.err
    assert _codes(res, "GT874") == [], res.err


def test_monte_carlo_dropout_set_on_purpose_is_silent(run_script):
    res = run_script(MC_DROPOUT)
    assert res.code == 0, res.err
    assert _codes(res, "GT874") == [], res.err


def test_evaluated_before_training_is_silent(run_script):
    res = run_script(BEFORE_TRAINING)
    assert res.code == 0, res.err
    assert _codes(res, "GT874") == [], res.err


# --- NOTE [average that skips the statistics] ------------------------------------------------

def test_parameters_hold_no_buffers():
    m = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    ids = {id(p) for p in m.parameters()}
    assert id(m[1].running_mean) not in ids and id(m[1].running_var) not in ids


TEACHER = HEAD + """
import copy


class Updater:
    @torch.no_grad()
    def update(self, online, momentum, tau=0.99):
{update}


student = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
teacher = copy.deepcopy(student)
teacher.{mode}()
for p in teacher.parameters():
    p.requires_grad = False
opt = torch.optim.SGD(student.parameters(), lr=0.05)
up = Updater()
for step in range(6):
    x = torch.randn(32, 6) * 2 + 3
    with torch.no_grad():
        pseudo = teacher(x).argmax(1)
    loss = nn.functional.cross_entropy(student(x), pseudo)
    opt.zero_grad()
    loss.backward()
    opt.step()
    up.update(student, teacher)
"""

PARAMS_ONLY = """\
        for op, mp in zip(online.parameters(), momentum.parameters()):  # <- cause
            mp.data.mul_(tau)
            mp.data.add_(op.data * (1 - tau))"""

WITH_BUFFERS = """\
        for op, mp in zip(online.parameters(), momentum.parameters()):
            mp.data.mul_(tau)
            mp.data.add_(op.data * (1 - tau))
        for ob, mb in zip(online.buffers(), momentum.buffers()):
            mb.copy_(ob)"""

# variant: an EMA class over named parameters with lerp_, the EMA model evaluated in eval mode
EMA_CLASS = HEAD + """
import copy


class EMA:
    def __init__(self, model, decay=0.9):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        self.shadow.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        own = dict(model.named_parameters())
        for name, p in self.shadow.named_parameters():  # <- cause
            p.lerp_(own[name], 1 - self.decay)


net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(), nn.Linear(4, 2))
ema = EMA(net)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(5):
    loss = net(torch.randn(4, 3, 8, 8) + 1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema.update(net)
    with torch.no_grad():
        ema.shadow(torch.randn(2, 3, 8, 8))
"""


def test_teacher_averaged_from_parameters_only_names_the_loop(run_script):
    src = TEACHER.format(update=PARAMS_ONLY, mode="eval")
    res = run_script(src)
    assert _first(res) == ("GT866", marked_line(src)), res.err


def test_ema_class_over_named_parameters_variant(run_script):
    res = run_script(EMA_CLASS)
    assert _first(res) == ("GT866", marked_line(EMA_CLASS)), res.err


def test_teacher_averaging_its_buffers_too_is_silent(run_script):
    res = run_script(TEACHER.format(update=WITH_BUFFERS, mode="eval"))
    assert res.code == 0, res.err
    assert _codes(res, "GT866") == [], res.err


def test_target_network_in_train_mode_moves_its_own_statistics_silent(run_script):
    res = run_script(TEACHER.format(update=PARAMS_ONLY.replace("  # <- cause", ""), mode="train"))
    assert res.code == 0, res.err
    assert _codes(res, "GT866") == [], res.err
