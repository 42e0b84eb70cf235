"""trace() arming (NOTE [trace arming]): every torch call recorded on the first optimizer steps,
then on sampled ones; same bits, nothing left installed, bugs of every step still found."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import gradtrace
from gradtrace.runtime.pace import QUIET_STEPS, WARM_STEPS



def _installed() -> tuple[int, ...]:
    from torch.nn.modules import module as mm
    from torch.optim import optimizer as om

    return (torch._C._len_torch_function_stack(), len(mm._global_forward_pre_hooks),
            len(mm._global_forward_hooks), len(om._global_optimizer_pre_hooks),
            len(om._global_optimizer_post_hooks))


class _PassThrough(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _loop(steps: int, tracer=None, cut: bool = False, nan_at: int = -1,
          user_mode_from: int = -1) -> tuple[list[bool], list[torch.Tensor]]:
    """Train a small MLP; per step, whether the tracer's mode was on the stack in forward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(12, 6), torch.randn(12, 2)
    armed = []
    for i in range(steps):
        opt.zero_grad()
        armed.append(tracer is not None and tracer.arming.armed)
        out = model(x)
        if cut:
            out = model[2](model[1](model[0](x))).detach()
            out.requires_grad_()
        loss = F.mse_loss(out, y)
        if i == nan_at:
            loss = loss * torch.tensor(float("nan"))
        loss.backward()
        if i == user_mode_from:
            _PassThrough().__enter__()  # the user's own mode, left on top of ours
        opt.step()
    return armed, [p.detach().clone() for p in model.parameters()]


def test_first_steps_armed_then_one_in_n_and_same_bits():
    before = _installed()
    _, plain = _loop(80)
    with gradtrace.trace(every=5) as tr:
        armed, traced = _loop(80, tr)
    assert _installed() == before
    assert all(armed[:WARM_STEPS])
    assert [i for i in range(WARM_STEPS, 80) if armed[i]] == list(range(20, 80, 5))
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))


def test_auto_pace_disarms_and_keeps_the_bits():
    _, plain = _loop(120)
    with gradtrace.trace() as tr:
        armed, traced = _loop(120, tr)
    assert all(armed[:QUIET_STEPS]) and not all(armed)  # NOTE [quiet warm-up]
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))


def test_exit_while_unarmed_and_on_error_leaves_nothing_installed():
    before = _installed()
    with gradtrace.trace(every=1000) as tr:
        _loop(WARM_STEPS + 3, tr)
        assert not tr.arming.armed
    assert _installed() == before
    try:
        with gradtrace.trace(every=1000) as tr:
            _loop(WARM_STEPS + 3, tr)
            raise KeyError("user error")
    except KeyError:
        pass
    assert _installed() == before


def test_a_cut_made_every_step_is_found_as_with_every_step_armed():
    def codes(every):
        with gradtrace.trace(every=every, static=False) as tr:
            _loop(60, tr, cut=True)
        return sorted((f.code, f.line) for f in tr.findings)

    always = codes(1)
    assert always and codes(None) == always


def test_non_finite_gradient_arms_again():
    with gradtrace.trace(every=1000) as tr:
        armed, _ = _loop(80, tr, nan_at=63)  # step 64 is a due step: gradients checked
    assert not armed[40]
    assert all(armed[64:64 + WARM_STEPS])


def test_a_user_mode_on_top_keeps_the_tracer_armed():
    before = torch._C._len_torch_function_stack()
    with gradtrace.trace(every=1000) as tr:
        armed, _ = _loop(WARM_STEPS + 10, tr, user_mode_from=WARM_STEPS - 3)
        torch._C._pop_torch_function_stack()  # the user's mode
    assert all(armed)
    assert torch._C._len_torch_function_stack() == before


def test_a_rank_of_a_multi_process_launch_is_armed_throughout():
    from gradtrace.runtime.distributed.info import RankInfo
    from gradtrace.runtime.distributed.ranks import rank_session

    with gradtrace.trace() as tr:
        rank_session(tr, check_sync=0, info=RankInfo(0, 2, 0))  # made, not entered
        armed, _ = _loop(WARM_STEPS + 20, tr)
    assert all(armed)
    with gradtrace.trace() as tr, rank_session(tr, check_sync=0):  # one process: paced
        armed, _ = _loop(WARM_STEPS + 40, tr)
    assert all(armed[:QUIET_STEPS]) and not all(armed)


def test_every_must_be_a_positive_int():
    import pytest

    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(ValueError, match="every"):
            gradtrace.trace(every=bad)


def test_a_crash_on_an_unarmed_step_is_still_diagnosed():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    tr = gradtrace.trace(every=1000)
    try:
        with tr:
            for i in range(WARM_STEPS + 10):
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                loss.backward()  # the first backward frees the graph
                if i == WARM_STEPS + 5:
                    armed = tr.arming.armed
                    loss.backward()  # the second backward through a freed graph
                opt.step()
    except RuntimeError as exc:
        assert "second time" in str(exc)
    assert not armed
    # a second backward through a freed graph (GT509), from the traceback and the checker
    lines = {_line("the first backward"), _line("the second backward")}
    assert [(f.code, f.line in lines) for f in tr.findings][:1] == [("GT509", True)]


def _line(marker: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(test_a_crash_on_an_unarmed_step_is_still_diagnosed)
    return start + next(i for i, t in enumerate(lines) if marker in t)


def test_a_module_seen_only_on_unarmed_steps_is_not_said_never_to_run():
    torch.manual_seed(0)
    model, extra = nn.Linear(4, 1), nn.Linear(4, 4)
    opt = torch.optim.SGD([*model.parameters(), *extra.parameters()], lr=0.1)
    x = torch.randn(8, 4)
    with gradtrace.trace(every=1000, static=False) as tr:
        for i in range(WARM_STEPS + 10):
            opt.zero_grad()
            h = x
            if i > WARM_STEPS + 2:
                with torch.no_grad():
                    h = extra(x)  # runs, but only while the tracer is unarmed
            model(h).pow(2).mean().backward()
            opt.step()
    msgs = [f.message for f in tr.findings if "never received a gradient" in f.message]
    assert msgs == ["tensor of shape [4, 4], tensor of shape [4] never received a gradient: "
                    "no backward() reached it"]


def test_the_mode_is_off_the_stack_inside_optimizer_step_only():
    """NOTE [trace arming]: the optimizer's own work skips the mode; a closure's step keeps it,
    a step that raises gets it back at the end of the next step, the exit leaves nothing."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    inside: list[int] = []
    fail = [False]

    def probe(o, args, kwargs):
        inside.append(torch._C._len_torch_function_stack())
        if fail[0]:
            raise RuntimeError("boom")

    opt.register_step_pre_hook(probe)
    x = torch.randn(3, 4)
    before = _installed()
    with gradtrace.trace(every=1):
        model(x).sum().backward()
        opt.step()
        after = torch._C._len_torch_function_stack()

        def closure():
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            return loss

        opt.step(closure)
        fail[0] = True
        try:
            opt.step()
        except RuntimeError:
            pass
        fail[0] = False
        popped = torch._C._len_torch_function_stack()
        model(x)
        opt.step()
        again = torch._C._len_torch_function_stack()
        fail[0] = True
        try:
            opt.step()  # raises with the mode off: the exit must not pop anything else
        except RuntimeError:
            pass
    assert inside[:3] == [0, 1, 0] and (after, popped, again) == (1, 0, 1)
    assert _installed() == before


def test_a_dead_leaf_leaves_the_cut_upstream_sets():
    """A leaf that died is no longer upstream of a cut: a later tensor that reuses its id
    (a freshly built model's parameter) must not be taken for it."""
    keep = torch.randn(3, requires_grad=True)
    gone = torch.randn(3, requires_grad=True)
    with gradtrace.trace(every=1) as tr:
        (keep * gone).detach()
    kid, gid = id(keep), id(gone)
    assert [sorted(ids) for ids in tr.state.cut_upstream.values()] == [sorted((kid, gid))]
    del gone
    assert list(tr.state.cut_upstream.values()) == [frozenset((kid,))]
