"""assert_gradients_flow on real models: verdicts, reasons, allow-lists, and state restored."""
from __future__ import annotations

import random

import pytest
import torch
from flow_models import Extras, TwoHeads, line_of, two_head_loss
from torch import nn

import gradtrace.testing.flow as flow_mod
from gradtrace.guards import LossTypeError
from gradtrace.testing import GradientFlowError, assert_gradients_flow


def _data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g), \
        torch.randn(8, generator=g)


def _fail(model: nn.Module, step, **kw) -> GradientFlowError:
    with pytest.raises(GradientFlowError) as info:
        assert_gradients_flow(model, step, **kw)
    return info.value


def _reasons(err: GradientFlowError) -> dict[str, str]:
    return {p.name: p.reason for p in err.result.problems}


def test_detached_second_head_fails_naming_its_parameters_and_the_detach_line() -> None:
    x, y, t = _data()
    err = _fail(TwoHeads(detach_second=True), (x, two_head_loss(y, t)))
    reasons = _reasons(err)
    assert set(reasons) == {"head2.weight", "head2.bias"}
    where = f"flow_models.py:{line_of('detach')}"
    assert all(where in r and "`.detach()`" in r for r in reasons.values())
    text = str(err)
    assert "head2.weight, head2.bias" in text and where in text
    assert "2 of 8 trainable parameters of TwoHeads" in text
    assert {f.line for f in err.result.findings} == {line_of("detach")}
    assert {(f.code, f.name) for f in err.result.findings} == {("GT107", "detached-loss-term")}
    assert all(f.source == "runtime" for f in err.result.findings)


def test_detach_line_named_without_the_runtime_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flow_mod, "_start_tracer", lambda: None)
    x, y, t = _data()
    err = _fail(TwoHeads(detach_second=True), (x, two_head_loss(y, t)))
    assert all(f"flow_models.py:{line_of('detach')}" in r for r in _reasons(err).values())


def test_correct_model_passes_and_reports_every_parameter_flowing() -> None:
    x, y, t = _data()
    model = TwoHeads()
    result = assert_gradients_flow(model, (x, two_head_loss(y, t)))
    assert set(result.flowing) == {n for n, _ in model.named_parameters()}
    assert result.problems == () and result.allowed == ()


@pytest.mark.parametrize("allow", [["head2.weight", "head2.bias"], ["head2"], ["head2.*"], "head2"])
def test_allow_none_accepts_names_prefixes_and_globs(allow) -> None:
    x, y, t = _data()
    result = assert_gradients_flow(TwoHeads(detach_second=True), (x, two_head_loss(y, t)),
                                   allow_none=allow)
    assert set(result.allowed) == {"head2.weight", "head2.bias"}


def test_allow_pattern_matching_nothing_is_a_value_error() -> None:
    x, y, t = _data()
    with pytest.raises(ValueError, match="'haed2' matches no parameter.*head2.weight"):
        assert_gradients_flow(TwoHeads(), (x, two_head_loss(y, t)), allow_none=["haed2"])


def test_zero_gradient_fails_unless_allowed() -> None:
    step = (torch.randn(3, 4), lambda o: o.sum())
    err = _fail(Extras("zero"), step)
    assert _reasons(err)["extra"].startswith("the gradient is exactly 0 in all 2 elements")
    assert assert_gradients_flow(Extras("zero"), step, allow_zero=["extra"]).allowed == ("extra",)
    with pytest.raises(GradientFlowError):  # allow_none does not cover an all-zero gradient
        assert_gradients_flow(Extras("zero"), step, allow_none=["extra"])


def test_nonfinite_gradient_fails_unless_check_finite_is_off() -> None:
    step = (torch.randn(3, 4), lambda o: o.sum())
    err = _fail(Extras("nan"), step)
    assert _reasons(err) == {"extra": "the gradient has 1 NaN of 2 elements"}
    assert err.result.findings[0].code == "GT825"
    assert "extra" in assert_gradients_flow(Extras("nan"), step, check_finite=False).flowing


@pytest.mark.parametrize("problem, expected, marker, code", [
    ("unused", "not used in the forward pass", None, "GT820"),
    ("no_grad", "only used with grad mode off", "no_grad", "GT201"),
    ("data", "only read through `.data`", "data", "GT105"),
    ("freeze", "the step froze it (requires_grad set to False", "freeze", "GT820"),
    ("argmax", "the graph was cut at", "argmax", "GT108"),
])
def test_reason_for_a_missing_gradient(problem: str, expected: str, marker: str | None,
                                       code: str) -> None:
    model = Extras(problem)
    err = _fail(model, (torch.randn(3, 4), lambda o: o.sum()))
    reason = _reasons(err)["extra"]
    assert set(_reasons(err)) == {"extra"}
    assert reason.startswith("grad is None: ") and expected in reason
    if marker is not None:
        assert f"flow_models.py:{line_of(marker)}" in reason
        assert err.result.findings[0].line == line_of(marker)
    assert err.result.findings[0].code == code
    assert model.extra.requires_grad  # the freeze inside the step was undone


def test_parameter_in_no_optimizer_is_reported() -> None:
    model = Extras("ok")
    opt = torch.optim.SGD(model.fc.parameters(), lr=0.1)
    err = _fail(model, (torch.randn(3, 4), lambda o: o.sum()), optimizer=opt)
    assert [(p.name, p.kind) for p in err.result.problems] == [("extra", "no-optimizer")]
    assert err.result.findings[0].code == "GT821"
    assert "no optimizer updates them" in str(err)


def test_model_recreated_after_optimizer_gets_a_hint() -> None:
    opt = torch.optim.SGD(Extras("ok").parameters(), lr=0.1)
    model = Extras("ok")  # re-created: the optimizer holds the old tensors
    err = _fail(model, (torch.randn(3, 4), lambda o: o.sum()), optimizer=[opt])
    assert {p.name for p in err.result.problems} == {"fc.weight", "fc.bias", "extra"}
    assert "re-created" in err.result.problems[0].reason
    assert err.result.findings[0].code == "GT404"


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_state_is_restored_after_a_full_training_step() -> None:
    torch.manual_seed(1)
    x, y, t = _data()
    model = TwoHeads()
    model.head1.weight.grad = torch.full_like(model.head1.weight, 7.0)
    old_grad = model.head1.weight.grad
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    before, opt_before = _state(model), repr(opt.state_dict())
    model.eval()
    model.body[1].train()
    rng = torch.get_rng_state()
    py_rng = random.getstate()

    def step() -> None:
        model.train()
        opt.zero_grad()
        loss = two_head_loss(y, t)(model(x))
        loss.backward()
        opt.step()
        random.random()

    assert_gradients_flow(model, step, optimizer=opt)
    after = _state(model)
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)  # incl. BN running stats
    assert repr(opt.state_dict()) == opt_before and not opt.state
    assert model.head1.weight.grad is old_grad and bool((old_grad == 7).all())
    assert all(p.grad is None for n, p in model.named_parameters() if n != "head1.weight")
    assert not model.training and model.body[1].training and not model.body[3].training
    assert torch.equal(torch.get_rng_state(), rng) and random.getstate() == py_rng


def test_state_restored_when_the_step_raises_and_the_error_is_diagnosed() -> None:
    model = Extras("ok")
    before = _state(model)

    def step() -> None:
        model.train(False)
        torch.set_grad_enabled(False)  # noqa: GT203
        model.fc.weight.add_(1.0)
        model(torch.randn(3, 4)).sum().backward()

    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad") as info:
        assert_gradients_flow(model, step)
    assert torch.is_grad_enabled() and model.training
    assert all(torch.equal(before[k], v) for k, v in _state(model).items())
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "gradtrace diagnosis" in notes


def test_step_may_return_the_loss_and_autograd_grad_counts() -> None:
    model = Extras("ok")
    x = torch.randn(3, 4)
    assert len(assert_gradients_flow(model, lambda: model(x).sum()).flowing) == 3
    assert len(assert_gradients_flow(model, lambda: (model(x).sum(), {"n": 3})).flowing) == 3
    assert len(assert_gradients_flow(model, (x, lambda o: {"loss": o.sum()})).flowing) == 3
    params = list(model.parameters())

    def grad_step() -> None:
        torch.autograd.grad(model(x).sum(), params)

    assert len(assert_gradients_flow(model, grad_step).flowing) == 3
    assert all(p.grad is None for p in params)


def test_step_without_backward_or_loss_is_explained() -> None:
    model = Extras("ok")
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="ran no backward pass .* returned None"):
        assert_gradients_flow(model, lambda: None)
    with pytest.raises(LossTypeError, match="returned a Python float"):
        assert_gradients_flow(model, lambda: model(x).sum().item())


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="needs an nn.Module, got function"):
        assert_gradients_flow(lambda: None, lambda: None)  # type: ignore[arg-type]
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameter"):
        assert_gradients_flow(frozen, (torch.randn(1, 2), lambda o: o.sum()))
    with pytest.raises(TypeError, match="step must be a callable"):
        assert_gradients_flow(nn.Linear(2, 2), 3)  # type: ignore[arg-type]


def test_frozen_parameters_are_listed_not_checked() -> None:
    model = TwoHeads(detach_second=True)
    model.head2.requires_grad_(False)
    x, y, t = _data()
    result = assert_gradients_flow(model, (x, two_head_loss(y, t)))
    assert result.frozen == ("head2.weight", "head2.bias")


def test_inputs_as_dict_and_tuple() -> None:
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(2, 1), nn.Linear(3, 1)

        def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return self.a(u) + self.b(v)

    u, v = torch.randn(4, 2), torch.randn(4, 3)
    m = Two()
    assert len(assert_gradients_flow(m, ((u, v), lambda o: o.mean())).flowing) == 4
    assert len(assert_gradients_flow(m, ({"u": u, "v": v}, lambda o: o.pow(2).mean())).flowing) == 4


def test_reentrant_checkpoint_without_grad_inputs_is_explained() -> None:
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner, self.out = nn.Linear(4, 4), nn.Linear(4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(checkpoint(self.inner, x, use_reentrant=True))

    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        err = _fail(Checkpointed(), (torch.randn(2, 4), lambda o: o.sum()))
    reasons = _reasons(err)
    assert set(reasons) == {"inner.weight", "inner.bias"}
    assert "torch.utils.checkpoint" in reasons["inner.weight"]
    assert "use_reentrant=False" in reasons["inner.weight"]


def test_non_differentiable_cut_needs_the_tracer_and_degrades_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    step = (torch.randn(3, 4), lambda o: o.sum())
    traced = _reasons(_fail(Extras("argmax"), step))["extra"]
    assert f"flow_models.py:{line_of('argmax')}" in traced and "`argmax`" in traced
    monkeypatch.setattr(flow_mod, "_start_tracer", lambda: None)
    plain = _reasons(_fail(Extras("argmax"), step))["extra"]
    assert "no gradient path from the loss reaches it" in plain and "argmax" in plain
    assert f"flow_models.py:{line_of('argmax')}" in plain  # its first use is still named


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, drop_w_grad: bool) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.drop = drop_w_grad
        return x * w  # <- function-forward

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x, w = ctx.saved_tensors
        return g * w, None if ctx.drop else (g * x).sum(0), None


class _UsesFunction(nn.Module):
    def __init__(self, drop: bool) -> None:
        super().__init__()
        self.lin, self.w, self.drop = nn.Linear(3, 3), nn.Parameter(torch.ones(3)), drop

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Scale.apply(self.lin(x), self.w, self.drop)


def test_custom_function_whose_backward_drops_a_gradient() -> None:
    step = (torch.randn(2, 3), lambda o: o.sum())
    assert len(assert_gradients_flow(_UsesFunction(drop=False), step).flowing) == 3
    reasons = _reasons(_fail(_UsesFunction(drop=True), step))
    assert set(reasons) == {"w"}
    assert "custom autograd.Function `_Scale.forward`" in reasons["w"]
    assert "`_Scale.backward` returns" in reasons["w"] and "grad mode off" not in reasons["w"]
    import inspect
    lines, first = inspect.getsourcelines(_Scale.forward)
    line = first + next(i for i, t in enumerate(lines) if "# <- function-forward" in t)
    assert f"test_flow.py:{line}" in reasons["w"]


def test_parameter_used_through_a_view_property_then_detached() -> None:
    class ViaT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w, self.b = nn.Parameter(torch.randn(3, 3)), nn.Parameter(torch.zeros(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w.T.detach() + self.b

    reasons = _reasons(_fail(ViaT(), (torch.randn(2, 3), lambda o: o.sum())))
    assert set(reasons) == {"w"} and "via `.detach()`" in reasons["w"]
    assert "not used" not in reasons["w"]
