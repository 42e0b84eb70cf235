"""gradcheck_module: float64 copies, a correct Function passes, a wrong backward is named."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.autograd.gradcheck import GradcheckError

from gradtrace.testing import GradcheckFailure, gradcheck_module


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


class WrongScale(torch.autograd.Function):
    """y = x * w; the weight gradient is doubled by mistake."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        return g * w, 2 * g * x  # wrong: the weight gradient is g * x


class CubeNoDoubleBackward(torch.autograd.Function):
    """First derivative right, but computed from a detached input: second derivative is 0."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return g * 3 * x.detach() ** 2


class ScaleLayer(nn.Module):
    """A custom layer whose Function has a wrong weight gradient."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return WrongScale.apply(x, self.weight.expand_as(x).contiguous())


def test_correct_custom_function_passes_including_gradgrad() -> None:
    assert gradcheck_module(Cube, torch.randn(5), gradgrad=True) is True
    assert gradcheck_module(Cube.apply, torch.randn(2, 3)) is True


def test_float32_layer_passes_because_it_is_checked_in_float64() -> None:
    lin = nn.Linear(6, 3)
    x = torch.randn(4, 6)
    with pytest.raises(GradcheckError), pytest.warns(UserWarning, match="double precision"):
        torch.autograd.gradcheck(lin, (x.clone().requires_grad_(True),))  # the articles' way
    assert gradcheck_module(lin, x, gradgrad=True) is True
    assert lin.weight.dtype == torch.float32 and not x.requires_grad  # nothing changed


def test_wrong_backward_is_caught_and_the_input_and_output_named() -> None:
    x = torch.randn(4, 3)
    w = torch.randn(4, 3)
    with pytest.raises(GradcheckFailure) as info:
        gradcheck_module(WrongScale, x, w)
    err = info.value
    assert err.input_name == "input 1 `w` (shape (4, 3))"
    assert err.output_name == "the output (shape (4, 3))"
    assert "with respect to input 1 `w`" in str(err) and "WrongScale.apply" in str(err)
    assert isinstance(err, AssertionError) and isinstance(err.__cause__, GradcheckError)


def test_wrong_parameter_gradient_of_a_module_is_named() -> None:
    with pytest.raises(GradcheckFailure) as info:
        gradcheck_module(ScaleLayer(3), torch.randn(2, 3))
    assert info.value.input_name == "parameter `weight` (shape (3,))"
    assert "ScaleLayer (float64 copy)" in str(info.value)


def test_gradgrad_catches_a_backward_that_is_not_differentiable() -> None:
    assert gradcheck_module(CubeNoDoubleBackward, torch.randn(3)) is True
    with pytest.raises(GradcheckFailure) as info:
        gradcheck_module(CubeNoDoubleBackward, torch.randn(3), gradgrad=True)
    err = info.value
    assert err.order == 2
    assert err.output_name == "the gradient with respect to input 0 `x` (shape (3,))"
    assert err.input_name == "input 0 `x` (shape (3,))"


def test_function_that_detaches_its_result_is_reported() -> None:
    with pytest.raises(GradcheckFailure, match="no output requires grad"):
        gradcheck_module(lambda t: t.detach() * 2, torch.randn(3))


def test_dropout_is_seeded_per_evaluation_and_global_rng_untouched() -> None:
    layer = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = torch.randn(3, 4)
    state = torch.get_rng_state()
    assert gradcheck_module(layer, x) is True
    assert torch.equal(torch.get_rng_state(), state)
    with pytest.raises(GradcheckError):  # unseeded, every evaluation draws a new mask
        torch.autograd.gradcheck(layer.double(), (x.double().requires_grad_(True),))


def test_integer_inputs_pass_through_and_no_grad_inputs_are_respected() -> None:
    emb = nn.Embedding(5, 2)
    assert gradcheck_module(emb, torch.tensor([0, 3, 3])) is True
    with pytest.raises(ValueError, match="nothing to check"):
        gradcheck_module(lambda a: a * 2, torch.randn(2), no_grad_inputs=[0])
    with pytest.raises(TypeError, match="got int"):
        gradcheck_module(3, torch.randn(2))


class WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        return (g * 2).sum(0)  # wrong: drops the batch dimension


def test_backward_that_raises_is_a_failure() -> None:
    with pytest.raises(GradcheckFailure, match="backward raised RuntimeError: .*invalid gradient"):
        gradcheck_module(WrongShape, torch.randn(4, 3))


def test_keyword_arguments_are_passed_but_not_differentiated() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor, *, mask: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * mask

    mask = torch.tensor([1.0, 0.0, 1.0])
    assert gradcheck_module(Masked(), torch.randn(2, 3), kwargs={"mask": mask}) is True
    assert mask.dtype == torch.float32 and not mask.requires_grad
