"""Session 52, helper recall52b: static recall on real-world misses. Each shape: a buggy twin
with its code and lines, silent look-alikes (written in another style than the real-world
case they come from)."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [saved before the arm]: a norm built by a helper with two returns saves the input
# before an `if`; one arm writes it in place (checked on torch 2.13: both norms raise)
MIXER = '''
import torch
from torch import nn


def norm_layer(dim, kind):
    if kind == "group":
        return nn.GroupNorm(2, dim)
    return {other}


class Mixer(nn.Module):
    def __init__(self, dim, kind="layer", scaled=False):
        super().__init__()
        self.pre = norm_layer(dim, kind)
        self.mix = nn.Linear(dim, dim)
        self.scaled = scaled

    def forward(self, x):
        y = self.mix(self.pre(x))
        {between}
        if self.scaled:
            x = x + 0.5 * y
        else:
            {write}
        return x
'''


def _mixer(other: str = "nn.LayerNorm(dim)", between: str = "pass",
           write: str = "x.add_(y)") -> list[int]:
    return _found(MIXER.format(other=other, between=between, write=write), "GT605")


def test_arm_writes_input_a_helper_built_norm_saved():
    assert _mixer() == [25]


def test_arm_augmented_write_after_norm():
    assert _mixer(write="x += y") == [25]


def test_arm_writes_out_of_place_is_silent():
    assert _mixer(write="x = x + y") == []


def test_input_rebound_before_the_arm_is_silent():
    assert _mixer(between="x = x * 2") == []


def test_helper_return_that_saves_nothing_is_silent():
    # nn.Identity hands its input back and saves nothing: not every return saves `x`
    assert _mixer(other="nn.Identity()") == []


# NOTE [parameter children]: each child of the model that holds weights frozen on its own
# line: the optimizer over the whole model gets nothing trainable (checked on torch 2.13:
# backward raises `element 0 of tensors does not require grad`)
WRAPPED = '''
import torch
import torch.nn.functional as F
from torch import nn


class Wrapper(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.width = width
        self.body = nn.Sequential(nn.Linear(4, width), nn.ReLU())
        self.head = nn.Linear(width, 2)
        {extra}

    def forward(self, x):
        return self.head(self.body(x)) * self.width


def fit(loader):
    net = Wrapper(8)
    net.body.requires_grad_(False)
    {second}
    {between}
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        opt.step()
'''


def _wrapped(extra: str = "pass", second: str = "net.head.requires_grad_(False)",
             between: str = "pass") -> list[int]:
    return _found(WRAPPED.format(extra=extra, second=second, between=between), "GT431")


def test_every_child_with_weights_frozen_one_by_one():
    assert _wrapped() == [22]


def test_children_frozen_by_parameter_loops():
    assert _wrapped(second="for p in net.head.parameters():\n        p.requires_grad = False"
                    ) == [23]


def test_one_child_left_trainable_is_silent():
    assert _wrapped(second="pass") == []


def test_own_parameter_left_trainable_is_silent():
    assert _wrapped(extra="self.scale = nn.Parameter(torch.ones(1))") == []


def test_layer_added_after_the_freeze_is_silent():
    assert _wrapped(between="net.extra = nn.Linear(2, 2)") == []


def test_layer_registered_at_run_time_is_silent():
    assert _wrapped(extra="self.add_module('gate', nn.Linear(2, 2))") == []


def test_the_only_child_with_weights_frozen():
    # `model.net.requires_grad_(False)` with `net` the one child that holds weights
    src = WRAPPED.replace("self.head = nn.Linear(width, 2)", "self.act = nn.ReLU()").replace(
        "self.head(self.body(x))", "self.act(self.body(x))")
    assert _found(src.format(extra="pass", second="pass", between="pass"), "GT431") == [21]


# NOTE [fixed namespace settings]: a script's settings fixed in one namespace decide the arm
# of a freeze loop: the adapter arm never runs, every parameter is frozen
SETTINGS = '''
import types
import torch
from torch import nn

cfg = types.SimpleNamespace(tune_norms={flag}, lr=1e-3)
{before}
model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
for name, p in model.named_parameters():
    if cfg.tune_norms and name.startswith("1."):
        p.requires_grad = True
    else:
        p.requires_grad = False
opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
'''


def _settings(flag: str = "False", before: str = "") -> list[int]:
    return _found(SETTINGS.format(flag=flag, before=before), "GT431")


def test_fixed_setting_skips_the_unfreezing_arm():
    assert _settings() == [13]


def test_setting_that_takes_the_unfreezing_arm_is_silent():
    assert _settings(flag="True") == []


def test_setting_written_before_the_loop_is_silent():
    # the namespace is written once more: not a fixed setting (here the norm stays trainable)
    assert _settings(before="cfg.tune_norms = True") == []


# NOTE [accumulation context]: accelerate's wrapped optimizer clears only on the window's last
# micro-step; cleared before that micro-step's backward, the window's other micro-batches are
# lost (checked with accelerate 1.16 on torch 2.13)
RUNNER = '''
import torch.nn.functional as F
from accelerate import Accelerator


class Runner:
    def __init__(self, model, opt, steps):
        self.acc = Accelerator(gradient_accumulation_steps=steps)
        self.model, self.opt = self.acc.prepare(model, opt)

    def epoch(self, batches):
        {outside}
        for x, y in batches:
            with self.acc.{context}:
                {first}
                loss = F.mse_loss(self.model(x), y)
                {backward}
                self.opt.step()
                {last}
'''


def _runner(first: str = "self.opt.zero_grad()", last: str = "pass", outside: str = "pass",
            backward: str = "self.acc.backward(loss)",
            context: str = "accumulate(self.model)") -> list[int]:
    return _found(RUNNER.format(first=first, last=last, outside=outside, backward=backward,
                                context=context), "GT512")


def test_clear_before_backward_in_accumulation_block():
    assert _runner() == [15]


def test_clear_before_plain_backward_in_accumulation_block():
    assert _runner(backward="loss.backward()") == [15]


def test_clear_after_step_in_accumulation_block_is_silent():
    assert _runner(first="pass", last="self.opt.zero_grad()") == []


def test_clear_before_the_block_is_silent():
    # outside the block the wrapped optimizer clears after a window's last step only
    assert _runner(first="pass", outside="self.opt.zero_grad()") == []


def test_clear_first_in_a_block_that_accumulates_nothing_is_silent():
    # `autocast()` steps on every pass: clearing first is the usual order
    assert _runner(context="autocast()") == []


# NOTE [window across epochs]: the window's count is carried across epochs, the epoch clears
# first: the micro-batches of the window open at an epoch's end are erased
EPOCHS = '''
import torch.nn.functional as F


def train(model, opt, loader, epochs, accumulate):
    last = -1
    nb = len(loader)
    {before}
    for epoch in range(epochs):
        {clear}
        for i, (x, y) in enumerate(loader):
            ni = i + nb * epoch
            F.mse_loss(model(x), y).backward()
            if {test}:
                opt.step()
                opt.zero_grad()
                last = ni
'''


def _epochs(before: str = "pass", clear: str = "opt.zero_grad()",
            test: str = "ni - last >= accumulate") -> list[int]:
    return _found(EPOCHS.format(before=before, clear=clear, test=test), "GT512")


def test_epoch_clear_erases_a_window_counted_across_epochs():
    assert _epochs() == [10]


def test_window_count_reset_each_epoch_is_silent():
    assert _epochs(clear="opt.zero_grad()\n        last = nb * epoch - 1") == []


def test_window_of_the_batch_index_is_silent():
    assert _epochs(test="(i + 1) % accumulate == 0") == []


def test_clear_before_the_epoch_loop_is_silent():
    assert _epochs(before="opt.zero_grad()", clear="pass") == []


TRAINER = '''
import torch


class Trainer:
    def __init__(self, model, accumulate):
        self.model, self.accumulate = model, accumulate
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, 0.9)

    def take_step(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad()

    def fit(self, loader, epochs):
        done = 0
        for epoch in range(epochs):
            {clear}
            for x, y in loader:
                self.model(x, y).backward()
                done += 1
                if done >= self.accumulate:
                    self.take_step()
                    done = 0
            self.sched.step()
'''


def test_epoch_clear_with_an_update_method():
    assert _found(TRAINER.format(clear="self.opt.zero_grad()"), "GT512") == [19]


def test_update_method_without_epoch_clear_is_silent():
    assert _found(TRAINER.format(clear="pass"), "GT512") == []


# NOTE [optimizers handed in]: the caller builds the optimizer (or a list of them) and hands it
# to the loop alone; the loop clears and backpropagates but never steps
HANDED = '''
import torch
import torch.nn.functional as F


def inner_loop(model, opt, batches):
    for x, y in batches:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        {step}


def run(model, batches):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    inner_loop(model, opt, batches)
    {after}
'''


def _handed(step: str = "pass", after: str = "pass") -> list[int]:
    return _found(HANDED.format(step=step, after=after), "GT544")


def test_handed_optimizer_never_stepped():
    assert _handed() == [9]


def test_handed_optimizer_stepped_is_silent():
    assert _handed(step="opt.step()") == []


def test_caller_uses_the_optimizer_again_is_silent():
    assert _handed(after="opt.step()") == []


def test_optimizer_from_an_unknown_caller_is_silent():
    assert _handed(after="inner_loop(model, make_optimizer(model), batches)") == []


LISTED = '''
import torch
import torch.nn.functional as F


def tune(parts, opts, x, y):
    for k in range(len(parts)):
        opts[k].zero_grad()
        F.mse_loss(parts[k](x), y).backward()
        {step}


def main(parts, x, y):
    opts = [torch.optim.Adam(p.parameters(), lr=1e-3) for p in parts]
    tune(parts, opts, x, y)
'''


def test_handed_list_of_optimizers_never_stepped():
    assert _found(LISTED.format(step="pass"), "GT544") == [9]


def test_handed_list_of_optimizers_stepped_is_silent():
    assert _found(LISTED.format(step="opts[k].step()"), "GT544") == []


# NOTE [decay per update]: a one-call StepLR with a large decay stepped at every update
DECAY = '''
import torch


def fit(model, loader, loss_fn, epochs, accum):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, {period}, {gamma})
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            (loss_fn(model(x), y) / accum).backward()
            if {test}:
                opt.step()
                opt.zero_grad()
                {inside}
        {after}
'''


def _decay(period: str = "1", gamma: str = "0.9", test: str = "(i + 1) % accum == 0",
           inside: str = "sched.step()", after: str = "pass") -> list[int]:
    return _found(DECAY.format(period=period, gamma=gamma, test=test, inside=inside,
                               after=after), "GT526")


def test_unit_step_decay_stepped_at_every_update():
    assert _decay() == [14]


def test_epoch_period_stepped_in_the_accumulation_branch():
    assert _decay(period="epochs // 3") == [14]


def test_gentle_per_update_decay_is_silent():
    assert _decay(gamma="0.999") == []


def test_unit_step_decay_stepped_per_epoch_is_silent():
    assert _decay(inside="pass", after="sched.step()") == []


def test_step_under_a_test_that_does_not_step_the_optimizer_is_silent():
    src = DECAY.format(period="1", gamma="0.9", test="(i + 1) % accum == 0",
                       inside="pass", after="pass").replace(
        "            (loss_fn(model(x), y) / accum).backward()\n",
        "            (loss_fn(model(x), y) / accum).backward()\n"
        "            if i == len(loader) - 1:\n                sched.step()\n")
    assert _found(src, "GT526") == []


TWO_MODELS = '''
def train(acc, model_a, model_b, opt_a, opt_b, batches):
    for batch in batches:
        with acc.accumulate(model_a, model_b):
            acc.backward(model_a(batch))
            opt_a.step()
            opt_a.zero_grad()
            acc.backward(model_b(batch))
            opt_b.step()
            opt_b.zero_grad()
'''


def test_one_model_cleared_before_the_other_models_backward_is_silent():
    # accelerate's two-model test: each optimizer cleared after its own step
    assert _found(TWO_MODELS, "GT512") == []


def test_one_model_cleared_before_its_own_backward():
    src = TWO_MODELS.replace("            acc.backward(model_b(batch))\n",
                             "            opt_b.zero_grad()\n            acc.backward(model_b(batch))\n")
    assert _found(src, "GT512") == [8]
