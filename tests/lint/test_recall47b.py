"""Session 47, helper recall47b: static facts that generalise (issue 13 part 3). Each fact: a
buggy twin reported on the cause's line and silent look-alikes, in words of no corpus."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [mode switches]: a stage switch freezes a trunk; the switch back never thaws it
STAGES = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.rebuild = nn.Linear(8, 6)
        self.classify = nn.Linear(8, 3)
        self.stage = "rebuild"

    def to_rebuild(self):
        self.stage = "rebuild"{thaw}

    def to_classify(self, lock):
        self.stage = "classify"
        if lock:
            for w in self.trunk.parameters():
                w.requires_grad = False

    def forward(self, x):
        z = self.trunk(x)
        return self.rebuild(z) if self.stage == "rebuild" else self.classify(z)


def fit_rebuild(model, xs):
    model.to_rebuild()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x in xs:
        opt.zero_grad()
        (model(x) - x).pow(2).mean().backward()
        opt.step()


def fit_classify(model, xs, ys):
    model.to_classify({lock})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


m = Model()
xs, ys = [torch.randn(4, 6)], [torch.randint(0, 3, (4,))]
fit_rebuild(m, xs)
fit_classify(m, xs, ys)
fit_rebuild(m, xs)
'''


def test_mode_switch_keeps_freeze_twin():
    assert _found(STAGES.format(thaw="", lock="lock=True"), "GT128") == [15]


def test_mode_switch_keeps_freeze_twin_positional_flag():
    assert _found(STAGES.format(thaw="", lock="True"), "GT128") == [15]


def test_mode_switch_thaws_lookalike():
    thaw = "\n        self.trunk.requires_grad_(True)"
    assert _found(STAGES.format(thaw=thaw, lock="lock=True"), "GT128") == []


def test_mode_switch_never_locks_lookalike():
    assert _found(STAGES.format(thaw="", lock="lock=False"), "GT128") == []


def test_mode_switch_thaws_through_helper_lookalike():
    thaw = "\n        set_trainable(self.trunk)"
    src = STAGES.format(thaw=thaw, lock="lock=True") + (
        "\n\ndef set_trainable(mod):\n    for w in mod.parameters():\n        w.requires_grad = True\n")
    assert _found(src, "GT128") == []


def test_mode_switch_mode_without_trunk_lookalike():
    src = STAGES.format(thaw="", lock="lock=True").replace(
        "        z = self.trunk(x)\n        return self.rebuild(z) if",
        "        return self.rebuild(x) if").replace("self.classify(z)", "self.classify(x)")
    # forward no longer runs the trunk in any mode
    assert _found(src, "GT128") == []


def test_mode_switch_not_trained_after_lookalike():
    src = STAGES.format(thaw="", lock="lock=True").replace(
        "fit_rebuild(m, xs)\nfit_classify", "fit_classify").replace(
        "def fit_rebuild(model, xs):\n    model.to_rebuild()\n",
        "def fit_rebuild(model, xs):\n")
    assert _found(src, "GT128") == []


METHOD_MODES = '''
import torch
import torch.nn as nn


class Twin(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(5, 5)
        self.out_a = nn.Linear(5, 1)
        self.out_b = nn.Linear(5, 1)
        self.use_a()

    def use_a(self):
        self.forward = self._run_a

    def use_b(self):
        self.forward = self._run_b
        self.body.requires_grad_(False)

    def _run_a(self, x):
        return self.out_a({a_in})

    def _run_b(self, x):
        return self.out_b(self.body(x))


net = Twin()
net.use_b()
net.use_a()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
net(torch.randn(2, 5)).sum().backward()
opt.step()
'''


def test_method_mode_runs_frozen_body_twin():
    assert _found(METHOD_MODES.format(a_in="self.body(x)"), "GT128") == [15]


def test_method_mode_skips_body_lookalike():
    assert _found(METHOD_MODES.format(a_in="x"), "GT128") == []


# NOTE [flag turned on by a call] and NOTE [uncalled methods]: reentrant checkpoints over a
# frozen token table, turned on by a method the script calls; the method that would mark the
# table's output as requiring grad is defined but never run
RECOMPUTE = '''
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Adapter(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.low = nn.Linear(inner.in_features, inner.out_features, bias=False)

    def forward(self, x):
        return self.inner(x) + self.low(x)


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(50, 16)
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(3))
        self.out = nn.Linear(16, 50)
        self.recompute = False

    def turn_recompute_on(self):
        self.recompute = True

    def mark_inputs(self):
        def hook(mod, args, result):
            result.requires_grad_(True)
        self.table.register_forward_hook(hook)

    def forward(self, token_ids):
        z = self.table(token_ids)
        for layer in self.layers:
            if self.recompute:
                z = checkpoint(layer, z, use_reentrant=True)
            else:
                z = layer(z)
        return self.out(z)


def build():
    net = Stack()
    net.requires_grad_(False)
    for i, layer in enumerate(net.layers):
        net.layers[i] = Adapter(layer)
    net.turn_recompute_on(){mark}
    return net


net = build()
opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
ids = torch.randint(0, 50, (2, 8))
loss = nn.functional.cross_entropy(net(ids).flatten(0, 1), ids.flatten())
loss.backward()
opt.step()
'''


def test_recompute_turned_on_by_call_twin():
    assert _found(RECOMPUTE.format(mark=""), "GT205") == [37, 48]


def test_recompute_inputs_marked_lookalike():
    assert _found(RECOMPUTE.format(mark="\n    net.mark_inputs()"), "GT205") == []


def test_recompute_marked_by_name_lookalike():
    # the marking method is reached by name: it may run
    src = RECOMPUTE.format(mark='\n    getattr(net, "mark_inputs")()')
    assert _found(src, "GT205") == []


def test_recompute_on_in_init_reports_checkpoint_only():
    src = RECOMPUTE.format(mark="").replace("self.recompute = False", "self.recompute = True")
    assert _found(src, "GT205") == [37]


def test_recompute_flag_set_twice_reports_checkpoint_only():
    src = RECOMPUTE.format(mark="\n    net.turn_recompute_on()")
    assert _found(src, "GT205") == [37]


def test_uncalled_method_in_library_file_lookalike():
    # no module-level statement runs anything: a library's methods are called by its users
    src = RECOMPUTE.format(mark="")
    src = src[:src.index("net = build()")]
    assert _found(src, "GT205") == []


# NOTE [loops through calls]: the scheduler steps with the optimizer in a method that a batch
# loop of another method runs, itself run by the script's epoch loop
RUNNER = '''
import torch
import torch.nn as nn


class Runner:
    def attach(self, net, opt, sched):
        self.net, self.opt, self.sched = net, opt, sched

    def run_pass(self, batches):
        total = 0.0
        for xb, yb in batches:
            {call}
        {after}
        return total

    def fit_batch(self, xb, yb):
        self.opt.zero_grad()
        err = nn.functional.mse_loss(self.net(xb), yb)
        err.backward()
        self.opt.step()
        if self.sched is not None:
            self.sched.step()
        return err.item()


rounds = 6
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size={period}, gamma=0.5)
runner = Runner()
runner.attach(net, opt, sched)
batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(10)]
for r in range(rounds):
    runner.run_pass(batches)
'''


def _runner(call="total += self.fit_batch(xb, yb)", after="", period="rounds // 3"):
    return RUNNER.format(call=call, after=after, period=period)


def test_scheduler_stepped_through_batch_method_twin():
    assert _found(_runner(), "GT526") == [23]


def test_scheduler_period_in_iterations_lookalike():
    assert _found(_runner(period="rounds * len(batches)"), "GT526") == []


def test_scheduler_batch_method_called_on_some_passes_lookalike():
    call = "if len(xb) > 3:\n                total += self.fit_batch(xb, yb)"
    assert _found(_runner(call=call), "GT526") == []


def test_scheduler_stepped_only_under_pass_condition_lookalike():
    src = _runner().replace("if self.sched is not None:", "if self.opt.param_groups[0]['lr'] > 1:")
    assert _found(src, "GT526") == []


def test_scheduler_method_run_once_per_round_lookalike():
    src = _runner().replace("    runner.run_pass(batches)", "    runner.fit_batch(*batches[0])")
    assert _found(src, "GT526") == []
