"""Readings of docs/triage/static26d.md, each in spellings the real-world cases do not use, as a
buggy twin that real torch fails on (or that trains wrong) and a correct look-alike that runs;
the checker reports the first on its root line and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

UNUSED = (RuntimeError, "appears to not have been used in the graph")
NO_GRAD = (RuntimeError, "does not require grad")
VIEW_WRITE = (RuntimeError, "is a view and is being modified inplace")

# GT702: the inputs of autograd.grad copied or viewed in the call, in a method
METHOD_GRAD = '''
class Probe:
    def __init__(self):
        self.net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    def grad_norms(self, x):
        loss = self.net(x).pow(2).mean()
        gs = torch.autograd.grad(loss, INPUTS)
        return [g.norm() for g in gs]
norms = Probe().grad_norms(torch.randn(3, 4))
'''

# GT717: a helper called from backward recomputes and differentiates
RECOMPUTE = '''
def _energy_grad(x, w, g):
    REENABLE
        x = x.detach().requires_grad_()
        e = torch.tanh(x @ w).sum()
        gx, = torch.autograd.grad(e, x, g)
    return gx
class Energy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.tanh(x @ w).sum()
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return _energy_grad(x, w, g), None
x = torch.randn(3, 4, requires_grad=True)
Energy.apply(x, torch.randn(4, 2)).backward()
'''

# GT718: the bias's gradient computed under the weight's flag
GATED = '''
class Affine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias
    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_out @ weight
        if TEST:
            grad_w = grad_out.t() @ x
            grad_b = grad_out.sum(0)
        return grad_x, grad_w, grad_b
weight = torch.randn(3, 4)                       # frozen
bias = torch.zeros(3, requires_grad=True)        # trained
Affine.apply(torch.randn(5, 4), weight, bias).pow(2).sum().backward()
'''

# GT719: a gradient-reversal Function (a view of its input) whose output a method edits
REVERSE = '''
class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)
    @staticmethod
    def backward(ctx, g):
        return -g
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
    def forward(self, x):
        h = Reverse.apply(self.enc(x))
        SCALE
        return h
Head()(torch.randn(2, 4)).sum().backward()
'''

# GT781: an intermediate kept on ctx, a gradient penalty through the Function in a helper
PENALTY = '''
class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        KEEP
        return y * 2
    @staticmethod
    def backward(ctx, g):
        READ
        return 2 * y * g
def penalty(w, x):
    out = Exp.apply(x * w).sum()
    gx, = torch.autograd.grad(out, x, create_graph=True)
    return gx.pow(2).sum()
w = torch.tensor(0.5, requires_grad=True)
x = torch.randn(4, requires_grad=True)
penalty(w, x).backward()
ref = w.detach().clone().requires_grad_()
gx, = torch.autograd.grad((2 * torch.exp(x * ref)).sum(), x, create_graph=True)
gx.pow(2).sum().backward()
diff = (w.grad - ref.grad).abs().item()
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT702: every input made by `.view(-1)` in a comprehension of the call (a method)
    "grad-inputs-viewed-in-comprehension": (
        Shape(METHOD_GRAD.replace("INPUTS", "list(self.net.parameters())"), "GT702",
              holds="len(norms) == 4"),
        Shape(METHOD_GRAD.replace("INPUTS", "[p.view(-1) for p in self.net.parameters()]"),
              "GT702", 6, raises=UNUSED)),
    # GT702: a local copy of the weight, never used, is differentiated (the clone is not in
    # the graph); look-alike: the gradient of the weight is copied afterwards
    "grad-of-local-copy-never-used": (Shape("""
        def head_grad(model, x):
            w = model.weight
            g, = torch.autograd.grad(model(x).sum(), w)
            return g.clone()
        g = head_grad(nn.Linear(4, 2), torch.randn(3, 4))
        """, "GT702", holds="g.shape == (2, 4)"), Shape("""
        def head_grad(model, x):
            w = model.weight.clone()
            g, = torch.autograd.grad(model(x).sum(), w)
            return g
        g = head_grad(nn.Linear(4, 2), torch.randn(3, 4))
        """, "GT702", 3, raises=UNUSED)),
    # GT702: `.detach()` in the call fails even with allow_unused
    "grad-input-detached-in-call-allow-unused": (Shape("""
        lin = nn.Linear(4, 2)
        out = lin(torch.randn(3, 4)).sum()
        gs = torch.autograd.grad(out, [lin.weight, lin.bias], allow_unused=True)
        ok = all(g is not None for g in gs)
        """, "GT702", holds="ok"), Shape("""
        def grads(lin, x):
            out = lin(x).sum()
            return torch.autograd.grad(out, [lin.weight.detach(), lin.bias], allow_unused=True)
        grads(nn.Linear(4, 2), torch.randn(3, 4))
        """, "GT702", 3, raises=NO_GRAD)),
    # GT758: the probabilities are also returned as predictions, so the loss line is the fix
    # (a method of a loss class); look-alike: the loss takes the logits
    "softmax-kept-for-predictions-into-cross-entropy": (Shape("""
        class Criterion:
            def __call__(self, logits, y):
                probs = torch.softmax(logits, dim=-1)
                return F.cross_entropy(logits, y), probs
        logits = torch.tensor([[20.0, -20.0, -20.0]], requires_grad=True)
        loss, probs = Criterion()(logits, torch.tensor([0]))
        """, "GT758", holds="loss.item() < 1e-3"), Shape("""
        class Criterion:
            def __call__(self, logits, y):
                probs = torch.softmax(logits, dim=-1)
                return F.cross_entropy(probs, y), probs
        logits = torch.tensor([[20.0, -20.0, -20.0]], requires_grad=True)
        loss, probs = Criterion()(logits, torch.tensor([0]))
        """, "GT758", 4, holds="loss.item() > 0.5")),
    # GT758: the probabilities feed the loss only: the softmax is what to drop (as before)
    "softmax-only-into-cross-entropy-stays-on-softmax": (Shape("""
        def loss_of(logits, y):
            return F.cross_entropy(logits, y)
        loss = loss_of(torch.tensor([[20.0, -20.0]]), torch.tensor([0]))
        """, "GT758", holds="loss.item() < 1e-3"), Shape("""
        def loss_of(logits, y):
            p = torch.softmax(logits, dim=-1)
            return F.cross_entropy(p, y)
        loss = loss_of(torch.tensor([[20.0, -20.0]]), torch.tensor([0]))
        """, "GT758", 2, holds="loss.item() > 0.3")),
    # GT717: the recomputation is in a helper of backward; look-alike: the helper turns grad on
    "helper-of-backward-recomputes-without-grad": (
        Shape(RECOMPUTE.replace("REENABLE", "with torch.enable_grad():"), "GT717",
              holds="x.grad is not None"),
        Shape(RECOMPUTE.replace("REENABLE", "if True:"), "GT717", 4, raises=NO_GRAD)),
    # GT718: the bias's gradient only under the weight's flag; look-alike: both flags
    "bias-gradient-gated-on-weight-flag": (
        Shape(GATED.replace("TEST", "ctx.needs_input_grad[1] or ctx.needs_input_grad[2]"),
              "GT718", holds="bias.grad is not None"),
        Shape(GATED.replace("TEST", "ctx.needs_input_grad[1]"), "GT718", 12,
              holds="bias.grad is None")),
    # GT719: the output of a view-returning Function scaled in place in a module's forward;
    # look-alike: scaled out of place
    "reversal-output-scaled-in-place": (
        Shape(REVERSE.replace("SCALE", "h = h * 0.5"), "GT719"),
        Shape(REVERSE.replace("SCALE", "h.mul_(0.5)"), "GT719", 14, raises=VIEW_WRITE)),
    # GT770: scores multiplied by a length mask made in a helper, inside the softmax call;
    # look-alike: the padded scores are filled with -inf
    "length-mask-multiplied-into-softmax": (Shape("""
        def pool(scores, lengths):
            keep = torch.arange(scores.size(1))[None] < lengths[:, None]
            w = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
            return w
        w = pool(torch.randn(2, 5, requires_grad=True), torch.tensor([3, 5]))
        """, "GT770", holds="w[0, 3:].sum().item() == 0.0"), Shape("""
        def pool(scores, lengths):
            keep = torch.arange(scores.size(1))[None] < lengths[:, None]
            w = torch.softmax(scores * keep.float(), dim=-1)
            return w
        w = pool(torch.randn(2, 5, requires_grad=True), torch.tensor([3, 5]))
        """, "GT770", 3, holds="w[0, 3:].sum().item() > 0.1")),
    # GT781: the exp kept on ctx drops the second-order term of a gradient penalty;
    # look-alike: the input is saved and the exp recomputed in backward
    "exp-kept-on-ctx-under-gradient-penalty": (
        Shape(PENALTY.replace("KEEP", "ctx.save_for_backward(x)").replace(
            "READ", "y = torch.exp(ctx.saved_tensors[0])"), "GT781", holds="diff < 1e-5"),
        Shape(PENALTY.replace("KEEP", "ctx.out = y").replace("READ", "y = ctx.out"),
              "GT781", 5, holds="diff > 1e-3")),
    # GT781: the output itself kept on ctx is given the Function's graph (right second order)
    "output-kept-on-ctx-under-gradient-penalty": (
        Shape(PENALTY.replace("return y * 2", "return y").replace("return 2 * y * g",
              "return y * g").replace("(2 * torch.exp(x * ref))", "torch.exp(x * ref)").replace(
              "KEEP", "ctx.out = y").replace("READ", "y = ctx.out"), "GT781",
              holds="diff < 1e-5"),
        Shape(PENALTY.replace("KEEP", "ctx.out = y").replace("READ", "y = ctx.out"),
              "GT781", 5, holds="diff > 1e-3")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_function_output_of_data_is_not_reported() -> None:
    """GT719: an input that carries no graph makes no view error (checked on torch)."""
    from gradtrace.lint import check_source
    src = PRELUDE + REVERSE.replace("self.enc(x)", "torch.randn(2, 4)").replace(
        "SCALE", "h.mul_(0.5)").replace(".sum().backward()", ".sum()")
    assert [f for f in check_source(src, "s.py", select=["GT719"])] == []
    exec(compile(src, "s.py", "exec"), {})
