"""gradtrace.guards: safe_backward, loss_guard and requires_grad_mode raise documented errors."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradtrace
from gradtrace.guards._locate import active_trace_state
from gradtrace.guards import (GradModeError, LossShapeError, LossTypeError, NoGraphError,
                              SafeBackward, loss_guard, requires_grad_mode, safe_backward)

HERE = "test_guards.py"


def _line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, t in enumerate(lines) if t.rstrip().endswith(f"# <- {marker}"))


def _setup() -> tuple[nn.Linear, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    m = nn.Linear(3, 1)
    return m, torch.optim.SGD(m.parameters(), lr=0.1), torch.randn(4, 3), torch.randn(4, 1)


# -- safe_backward ---------------------------------------------------------------------------
def test_safe_backward_steps_and_counts() -> None:
    m, opt, x, y = _setup()
    guard = SafeBackward()
    w0 = m.weight.detach().clone()
    out = guard(F.mse_loss(m(x), y), opt)
    assert out and out.ran_backward and out.stepped and not out.skipped
    assert not torch.equal(m.weight, w0) and m.weight.grad is None  # stepped, then zeroed
    assert (guard.calls, guard.stepped, guard.skipped) == (1, 1, 0)


def test_safe_backward_skips_nonfinite_loss_and_counts_it() -> None:
    m, opt, x, y = _setup()
    guard = SafeBackward()
    w0 = m.weight.detach().clone()
    out = guard(F.mse_loss(m(x), y) * float("nan"), opt)
    assert not out and out.skipped and not out.ran_backward and out.reason == "the loss is nan"
    assert torch.equal(m.weight, w0) and m.weight.grad is None
    out = guard(F.mse_loss(m(x), y) + float("inf"), opt)
    assert out.skipped_total == 2 and out.calls_total == 2 and guard.skipped == 2
    guard.reset()
    assert guard.skipped == 0 and guard.last is None


def test_safe_backward_skips_the_step_on_nonfinite_gradients() -> None:
    m, opt, x, y = _setup()
    guard = SafeBackward()
    w0 = m.weight.detach().clone()
    loss = (m(x) * 0).sqrt().sum()  # finite (0) loss, but d sqrt(0) is inf
    out = guard(loss, opt)
    assert out.skipped and out.ran_backward and not out.stepped
    assert "non-finite gradients in param_groups[0]['params'][0]" in out.reason
    assert torch.equal(m.weight, w0) and m.weight.grad is None  # bad grads cleared
    out = guard((m(x) * 0).sqrt().sum(), opt, skip_nonfinite=False)
    assert out.stepped and bool(m.weight.isnan().any())


def test_safe_backward_large_finite_fp16_gradients_are_not_skipped() -> None:
    # every entry is finite (30,000 < 65,504) but the fp16 2-norm of them overflows to inf
    w = torch.zeros(16, dtype=torch.float16, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.0)
    out = SafeBackward()((w * 30000.0).sum(), opt)
    assert out.stepped and not out.skipped, out.reason
    out = SafeBackward()((w * 0).sqrt().sum(), opt)  # finite loss, d sqrt(0) is inf
    assert out.skipped and "non-finite gradients" in out.reason


def test_safe_backward_without_optimizer_only_runs_backward() -> None:
    m, _, x, y = _setup()
    out = SafeBackward()(F.mse_loss(m(x), y))
    assert out.ran_backward and not out.stepped and m.weight.grad is not None


@pytest.mark.parametrize("value, words", [
    (0.25, ["Python float (0.25)", "`loss.item()`"]),
    (3, ["Python int (3)", "accumulator"]),
    (np.float32(0.5), ["numpy.float32", "`.numpy()`"]),
    (None, ["None", "`loss = loss.backward()`"]),
])
def test_safe_backward_rejects_non_tensors_with_a_type_error(value, words) -> None:
    with pytest.raises(TypeError) as info:
        safe_backward(value)
    assert isinstance(info.value, LossTypeError)
    assert all(w in str(info.value) for w in words)


def test_float_from_item_is_traced_to_its_line() -> None:
    m, _, x, y = _setup()
    with gradtrace.trace():
        value = F.mse_loss(m(x), y).item()  # <- item
        with pytest.raises(LossTypeError) as info:
            safe_backward(value)
    line = _line(test_float_from_item_is_traced_to_its_line, "item")
    assert f"{HERE}:{line}" in str(info.value)


def test_safe_backward_rejects_non_scalar_and_graphless_losses() -> None:
    m, opt, x, y = _setup()
    with pytest.raises(ValueError, match=r"shape \(4, 1\) \(4 elements\).*\.mean\(\)"):
        safe_backward(F.mse_loss(m(x), y, reduction="none"), opt)
    with pytest.raises(RuntimeError, match="no autograd graph") as info:
        safe_backward(F.mse_loss(m(x).detach(), y), opt)
    assert isinstance(info.value, NoGraphError)
    with pytest.raises(TypeError, match="optimizer must be"):
        safe_backward(F.mse_loss(m(x), y), optimizer="sgd")


def test_graphless_loss_under_no_grad_names_the_block() -> None:
    m, _, x, y = _setup()

    def evaluate() -> None:
        with torch.no_grad():  # <- block
            safe_backward(F.mse_loss(m(x), y))

    with pytest.raises(NoGraphError) as info:
        evaluate()
    assert "`with torch.no_grad():  # <- block` at" in str(info.value)
    assert f"{HERE}:{_line(evaluate, 'block')}" in str(info.value)


# -- loss_guard ------------------------------------------------------------------------------
@loss_guard
def item_loss(out: torch.Tensor, y: torch.Tensor) -> float:
    loss = F.mse_loss(out, y)
    return loss.item()  # <- item-return


@loss_guard
def per_sample(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out, y, reduction="none")  # <- none-return


@loss_guard
def two_returns(out: torch.Tensor, y: torch.Tensor, flag: bool) -> torch.Tensor:
    if flag:
        return F.mse_loss(out, y)
    return out.detach().sum()


@loss_guard
def forgot_return(out: torch.Tensor, y: torch.Tensor) -> None:
    loss = F.mse_loss(out, y)  # noqa: F841


def test_loss_guard_names_the_problem_and_the_return_line() -> None:
    m, _, x, y = _setup()
    with pytest.raises(LossTypeError) as info:
        item_loss(m(x), y)
    text = str(info.value)
    assert text.startswith("`item_loss` returned a Python float")
    line = _line(item_loss, "item-return")
    assert "returned at " in text and f"{HERE}:{line}: `return loss.item()" in text
    with pytest.raises(LossShapeError) as info2:
        per_sample(m(x), y)
    assert f"{HERE}:{_line(per_sample, 'none-return')}" in str(info2.value)
    with pytest.raises(LossTypeError, match="has no `return` statement"):
        forgot_return(m(x), y)


def test_loss_guard_graph_check_follows_grad_mode() -> None:
    m, _, x, y = _setup()
    assert two_returns(m(x), y, True).requires_grad
    with pytest.raises(NoGraphError, match="returned by one of: .*return F.mse_loss.*return out"):
        two_returns(m(x), y, False)
    with torch.no_grad():  # validation: no graph needed
        assert not two_returns(m(x), y, True).requires_grad
    relaxed = loss_guard(require_graph=False)(lambda o: o.detach().sum())
    assert relaxed(m(x)).shape == ()


# -- requires_grad_mode ------------------------------------------------------------------------
@requires_grad_mode
def train_step(v: int) -> int:
    return v + 1


@torch.no_grad()  # <- decorator
def evaluate_with_decorator() -> int:
    return train_step(1)


def evaluate_with_block() -> int:
    with torch.no_grad():  # <- with
        return train_step(1)


def evaluate_with_call() -> int:
    torch.set_grad_enabled(False)  # <- call
    try:
        return train_step(1)
    finally:
        torch.set_grad_enabled(True)


def evaluate_inference() -> int:
    with torch.inference_mode():  # <- inference
        with torch.enable_grad():
            return train_step(1)


@pytest.mark.parametrize("fn, marker", [
    (evaluate_with_decorator, "decorator"), (evaluate_with_block, "with"),
    (evaluate_with_call, "call"), (evaluate_inference, "inference"),
])
def test_requires_grad_mode_names_where_grad_was_turned_off(fn, marker: str) -> None:
    assert train_step(1) == 2
    with pytest.raises(GradModeError) as info:
        fn()
    assert isinstance(info.value, RuntimeError)
    assert str(info.value).startswith("`train_step` must run with grad mode on")
    assert f"{HERE}:{_line(fn, marker)}" in str(info.value)
    assert torch.is_grad_enabled()


def test_enable_grad_inside_no_grad_is_fine() -> None:
    with torch.no_grad():
        with torch.enable_grad():
            assert train_step(2) == 3


def _turn_off() -> None:
    torch.set_grad_enabled(False)  # <- elsewhere


def test_switch_outside_the_stack_uses_the_tracer_or_says_the_caller() -> None:
    untraced = active_trace_state() is None  # (pytest --gradtrace traces this test too)
    try:
        _turn_off()
        with pytest.raises(GradModeError, match="turned off by the caller" if untraced else None):
            train_step(1)
    finally:
        torch.set_grad_enabled(True)
    with gradtrace.trace():
        try:
            _turn_off()
            with pytest.raises(GradModeError) as info:
                train_step(1)
        finally:
            torch.set_grad_enabled(True)
    assert f"{HERE}:{_line(_turn_off, 'elsewhere')}" in str(info.value)


def test_loss_guard_finds_the_loss_in_tuples_dicts_and_outputs() -> None:
    m, _, x, y = _setup()

    @loss_guard
    def with_logs(out: torch.Tensor):
        loss = F.mse_loss(out, y)
        return loss, {"mse": loss.item()}

    @loss_guard
    def as_dict(out: torch.Tensor):
        return {"loss": F.mse_loss(out, y).item(), "n": 4}

    class Output:
        def __init__(self, loss: torch.Tensor) -> None:
            self.loss = loss

    @loss_guard
    def as_object(out: torch.Tensor):
        return Output(F.mse_loss(out, y, reduction="none"))

    loss, logs = with_logs(m(x))
    assert loss.requires_grad and set(logs) == {"mse"}
    with pytest.raises(LossTypeError, match="returned a mapping whose 'loss' is a Python float"):
        as_dict(m(x))
    with pytest.raises(LossShapeError, match=r"returned an Output whose .loss is a loss of shape"):
        as_object(m(x))
