"""The static facts built for held-out batch 45 (docs/triage/ho51.md).

1. Autograd calls a custom Function's ``backward(ctx, *grads)`` with one gradient per output
   of its ``forward`` (a zero tensor for an output marked non-differentiable, None for one
   that is not a tensor): a ``backward`` taking another number of gradients raises a
   TypeError at the first backward (GT135).

Buggy twins on their line and silent look-alikes, in other spellings than the case's; every
snippet runs on real torch and the test checks what the finding claims."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace import check_source

torch = pytest.importorskip("torch")


def _found(src: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(textwrap.dedent(src)))


def _backward_error(src: str) -> str | None:
    """Run the snippet's ``Op.apply`` on a tensor that requires grad and backward through its
    first output: the error's text, or None when it runs."""
    ns: dict = {}
    exec(compile(textwrap.dedent(src), "<snippet>", "exec"), ns)
    x = torch.randn(4, 3, requires_grad=True)
    out = ns["Op"].apply(x)
    first = out[0] if isinstance(out, tuple) else out
    try:
        first.sum().backward()
    except TypeError as e:
        return str(e)
    assert x.grad is not None
    return None


# ---- 1: GT135 backward takes another number of gradients than forward has outputs -----------

# the outputs held in a local tuple; the count is a plain int output (not a tensor)
TUPLE_LOCAL = '''
import torch
from torch.autograd import Function

class Op(Function):
    @staticmethod
    def forward(ctx, x):
        keep = x > 0
        ctx.save_for_backward(keep)
        result = (x * keep, int(keep.sum()))
        return result

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return grad * keep
'''

# one output (a difference: never a tuple), two gradients taken
ONE_OUTPUT = '''
import torch

class Op(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x - x.mean(0, keepdim=True)

    @staticmethod
    def backward(ctx, grad, grad_stats):
        return grad - grad.mean(0, keepdim=True)
'''


def test_gt135_twin_tuple_local_with_non_tensor_output():
    assert _found(TUPLE_LOCAL) == [("GT135", 14)]
    assert "takes 2 positional arguments but 3 were given" in _backward_error(TUPLE_LOCAL)


def test_gt135_twin_one_output_two_gradients():
    assert _found(ONE_OUTPUT) == [("GT135", 10)]
    assert "missing 1 required positional argument: 'grad_stats'" in _backward_error(ONE_OUTPUT)


@pytest.mark.parametrize("fix", [
    # one argument per output, the second unused
    ("def backward(ctx, grad):", "def backward(ctx, grad, _count):"),
    # every incoming gradient taken at once
    ("def backward(ctx, grad):", "def backward(ctx, *grads):\n        grad = grads[0]"),
    # a default covers the second output
    ("def backward(ctx, grad):", "def backward(ctx, grad, grad_count=None):"),
])
def test_gt135_lookalikes_silent_and_run(fix):
    src = TUPLE_LOCAL.replace(*fix)
    assert src != TUPLE_LOCAL
    assert _found(src) == []
    assert _backward_error(src) is None


def test_gt135_silent_when_the_outputs_cannot_be_counted():
    # the forward returns what a helper returns (one tensor or a tuple: not told from here)
    src = ONE_OUTPUT.replace("return x - x.mean(0, keepdim=True)",
                             "return centre(x)").replace(
        "class Op", "def centre(x):\n    return x - x.mean(0, keepdim=True)\n\nclass Op")
    assert _found(src) == []


# ---- 2: GT202 past the single-process fallback of a gather helper ------------------------------
# NOTE [arm without a process group]: in a file that starts a process group, the
# `if not dist.is_initialized(): return x` arm does not run where the program trains across
# processes; what the helper returns there is made under its `@torch.no_grad()`.

GATHER = '''
import torch
import torch.distributed as dist
from torch import nn


@torch.no_grad()
def gather_rows(x):
    if not (dist.is_available() and dist.is_initialized()):
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts)


def fit(init):
    if init is not None:
        dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
    net = nn.Linear(4, 3)
    try:
        for _ in range(2):
            z = gather_rows(net(torch.randn(6, 4)))
            loss = torch.logsumexp(z @ z.t(), dim=1).mean()
            net.zero_grad()
            loss.backward()
            with torch.no_grad():
                for p in net.parameters():
                    p -= 0.1 * p.grad
    finally:
        if init is not None:
            dist.destroy_process_group()
    return net
'''


def _fit(src: str, init: str | None) -> BaseException | None:
    ns: dict = {}
    exec(compile(textwrap.dedent(src), "<snippet>", "exec"), ns)
    try:
        net = ns["fit"](init)
    except RuntimeError as e:
        return e
    assert net.weight.grad is not None and net.weight.grad.abs().sum() > 0
    return None


def test_gt202_twin_gather_helper_fallback_left_out(tmp_path):
    assert [f for f in _found(GATHER) if f[0] == "GT202"] == [("GT202", 7)]
    err = _fit(GATHER, f"file://{tmp_path / 'pg'}")  # the run across processes (world size 1)
    assert err is not None and "does not require grad" in str(err)


def test_gt202_lookalike_file_starts_no_process_group():
    # a single-process program: the fallback is the arm that runs, the graph is kept
    src = GATHER.replace('''    if init is not None:
        dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
''', "")
    assert src != GATHER
    assert _found(src) == []
    assert _fit(src, None) is None

