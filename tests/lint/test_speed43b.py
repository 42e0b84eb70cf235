"""speed43b: quadratic scans of a script's module body taken out (issue 12), with the answers
they must keep. Each test builds a module-level script of many training blocks (the shape of
``benchmarks/check_scaling.py``), so a wrong line range picks the wrong statements.

- GT503 ``_called_steps`` / ``_grads_written``: the statements between two lines come from
  ``LoopFacts.stmts_between`` (one line index per function), not a scan of ``scope.stmts`` per
  ``zero_grad``.
"""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source

HEAD = """\
import torch
import torch.nn as nn


def update(opt):
    opt.step()


model = nn.Linear(4, 1)
"""

CLEAN = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    opt{k}.zero_grad()
    loss{k} = model(x).sum()
    loss{k}.backward()
    update(opt{k})
"""

# the clear between backward and a helper's step (NOTE [step one call away])
BUGGY = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    loss{k} = model(x).sum()
    loss{k}.backward()
    opt{k}.zero_grad()
    update(opt{k})
"""

# the same clear, then gradients written by hand before the step: the step applies those
WRITTEN = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    loss{k} = model(x).sum()
    loss{k}.backward()
    opt{k}.zero_grad()
    model.weight.grad = torch.ones_like(model.weight)
    opt{k}.step()
"""

# the clear after the step: correct order
AFTER = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    loss{k} = model(x).sum()
    loss{k}.backward()
    update(opt{k})
    opt{k}.zero_grad()
"""


def _script(middle: str, n: int = 12) -> str:
    parts = [HEAD] + [CLEAN.format(k=k) for k in range(n)]
    parts.insert(1 + n // 2, middle.format(k=n))
    return "".join(parts)


def _found(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(src, select=[code])]


def _line_of(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if ln.strip() == text)


def test_clear_before_a_helper_step_in_a_long_script() -> None:
    src = _script(BUGGY)
    ast.parse(src)
    assert _found(src, "GT503") == [("GT503", _line_of(src, "opt12.zero_grad()"))]


def test_clear_then_grads_written_in_a_long_script_is_silent() -> None:
    assert _found(_script(WRITTEN), "GT503") == []


def test_clear_after_the_helper_step_in_a_long_script_is_silent() -> None:
    assert _found(_script(AFTER), "GT503") == []


def test_clean_script_is_silent() -> None:
    assert _found(_script(CLEAN), "GT503") == []


def test_buggy_first_and_last_block() -> None:
    """The range's ends: the buggy block first and last in the script."""
    for src in (HEAD + BUGGY.format(k=99) + "".join(CLEAN.format(k=k) for k in range(5)),
                HEAD + "".join(CLEAN.format(k=k) for k in range(5)) + BUGGY.format(k=99)):
        assert _found(src, "GT503") == [("GT503", _line_of(src, "opt99.zero_grad()"))]


# -- GT109: the steps between a backward and the next from one line index per scope ------------
GAN_HEAD = """\
import torch
import torch.nn as nn
import torch.nn.functional as F

"""

GAN_CLEAN = """
g{k}, d{k} = nn.Linear(4, 4), nn.Linear(4, 1)
opt_g{k} = torch.optim.Adam(g{k}.parameters())
fake{k} = g{k}(torch.randn(2, 4))
g_loss{k} = F.softplus(-d{k}(fake{k})).mean() + 100 * F.l1_loss(fake{k}, torch.zeros(2, 4))
g_loss{k}.backward()
opt_g{k}.step()
"""

# the generator's adversarial term scored on a detached fake (the rule's Bad example)
GAN_BUGGY = """
g{k}, d{k} = nn.Linear(4, 4), nn.Linear(4, 1)
opt_g{k} = torch.optim.Adam(g{k}.parameters())
fake{k} = g{k}(torch.randn(2, 4))
g_adv{k} = F.softplus(-d{k}(fake{k}.detach())).mean()
g_loss{k} = g_adv{k} + 100 * F.l1_loss(fake{k}, torch.zeros(2, 4))
g_loss{k}.backward()
opt_g{k}.step()
"""

# the same detached score in a loss whose backward another backward follows before the step:
# the step is the later loss's (the range of a backward ends at the next one)
GAN_UNSTEPPED = """
g{k}, d{k} = nn.Linear(4, 4), nn.Linear(4, 1)
opt_g{k} = torch.optim.Adam(g{k}.parameters())
fake{k} = g{k}(torch.randn(2, 4))
g_adv{k} = F.softplus(-d{k}(fake{k}.detach())).mean()
g_loss{k} = g_adv{k} + 100 * F.l1_loss(fake{k}, torch.zeros(2, 4))
g_loss{k}.backward()
other{k} = g{k}(torch.randn(2, 4)).sum()
other{k}.backward()
opt_g{k}.step()
"""


def _gan_script(middle: str, n: int = 10) -> str:
    parts = [GAN_HEAD] + [GAN_CLEAN.format(k=k) for k in range(n)]
    parts.insert(1 + n // 2, middle.format(k=n))
    return "".join(parts)


def test_gt109_cut_in_a_long_script() -> None:
    src = _gan_script(GAN_BUGGY)
    line = _line_of(src, "g_adv10 = F.softplus(-d10(fake10.detach())).mean()")
    assert _found(src, "GT109") == [("GT109", line)]


def test_gt109_clean_script_is_silent() -> None:
    assert _found(_gan_script(GAN_CLEAN), "GT109") == []


def test_gt109_no_step_of_its_own_before_the_next_backward_is_silent() -> None:
    """The step follows the next backward: not this loss's step."""
    assert _found(_gan_script(GAN_UNSTEPPED), "GT109") == []


def test_gt109_cut_first_and_last_block() -> None:
    for src in (GAN_HEAD + GAN_BUGGY.format(k=99) + "".join(GAN_CLEAN.format(k=k) for k in range(4)),
                GAN_HEAD + "".join(GAN_CLEAN.format(k=k) for k in range(4)) + GAN_BUGGY.format(k=99)):
        line = _line_of(src, "g_adv99 = F.softplus(-d99(fake99.detach())).mean()")
        assert _found(src, "GT109") == [("GT109", line)]


# -- GT523: the file's clearing helpers from the type index, not a walk of every node -----------
CLEARING = """
import torch


def clear(opt):
    opt.zero_grad()


class Trainer:
    async def reset(self, opt):
        opt.zero_grad()


def fit(model, opt, batches, use_amp, scaler):
    for x, y in batches:
        if use_amp:
            {call}
            scaler.scale(model(x, y)).backward()
        else:
            model(x, y).backward()
        opt.step()
"""

# a helper that also steps is an update, not a clearing helper
UPDATING = """
import torch


def clear(opt):
    opt.zero_grad()
    opt.step()


def fit(model, opt, batches, use_amp, scaler):
    for x, y in batches:
        if use_amp:
            clear(opt)
            scaler.scale(model(x, y)).backward()
        else:
            model(x, y).backward()
        opt.step()
"""


def test_gt523_clearing_helper_on_one_branch() -> None:
    src = CLEARING.format(call="clear(opt)")
    assert _found(src, "GT523") == [("GT523", _line_of(src, "clear(opt)"))]


def test_gt523_helper_that_steps_is_silent() -> None:
    assert _found(UPDATING, "GT523") == []


def test_gt523_unknown_call_is_silent() -> None:
    assert _found(CLEARING.format(call="print(opt)"), "GT523") == []
