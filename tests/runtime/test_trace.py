"""trace(): same bits as without it, nothing left installed, nothing kept alive; public API."""
from __future__ import annotations

import gc
import warnings
import weakref

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import gradtrace
from gradtrace.runtime.trace.tracer import diagnose


def _installed() -> tuple[int, ...]:
    from torch.nn.modules import module as mm
    from torch.optim import optimizer as om

    return (torch._C._len_torch_function_stack(), len(mm._global_forward_pre_hooks),
            len(mm._global_forward_hooks), len(om._global_optimizer_pre_hooks),
            len(om._global_optimizer_post_hooks), id(warnings.showwarning))


def _train(steps: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                          nn.Flatten(), nn.Dropout(0.2), nn.Linear(4 * 6 * 6, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 3, (8,))
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
    return [p.detach().clone() for p in model.parameters()]


def test_parameters_bitwise_equal_after_20_steps():
    plain = _train(20)
    with gradtrace.trace():
        traced = _train(20)
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))


def test_everything_removed_on_exit_and_on_error():
    before = _installed()
    with gradtrace.trace():
        assert _installed() != before
    assert _installed() == before
    with pytest.raises(RuntimeError):
        with gradtrace.trace():
            torch.zeros(1).backward()
    assert _installed() == before


def test_tracing_keeps_no_tensor_or_graph_alive():
    model = nn.Linear(4, 1)
    with gradtrace.trace():
        out = model(torch.randn(2, 4))
        cut = out.detach()  # recorded as a cut
        val = out.sum().item()  # recorded as an .item()
        loss = out.pow(2).sum()
        refs = [weakref.ref(t) for t in (out, cut, loss)]
        loss.backward()
        del out, cut, loss
        gc.collect()
        assert [r() for r in refs] == [None, None, None]
    assert isinstance(val, float)


def test_why_no_grad_names_the_cut_line():
    enc, head = nn.Linear(4, 4), nn.Linear(4, 1)
    with gradtrace.trace() as tr:
        feats = enc(torch.randn(3, 4)).detach()  # line A
        head(feats).sum().backward()
    line = test_why_no_grad_names_the_cut_line.__code__.co_firstlineno + 3
    f = tr.why_no_grad(enc.weight)
    assert f is not None and f.line == line and f.source == "runtime"
    assert tr.why_no_grad(head.weight) is None


def test_why_no_grad_frozen_and_unused():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = nn.Linear(2, 2)

        def forward(self, x):
            return self.a(x)

    net = Net()
    with gradtrace.trace() as tr:
        net.a.bias.requires_grad_(False)
        net(torch.randn(1, 2)).sum().backward()
    first = test_why_no_grad_frozen_and_unused.__code__.co_firstlineno
    frozen = tr.why_no_grad(net.a.bias)
    assert frozen is not None and frozen.line == first + 12 and "requires_grad=False" in \
        frozen.message
    unused = tr.why_no_grad(net.b.weight)
    assert unused is not None and unused.line == first + 5 and "never ran" in unused.message


def test_diagnose_without_and_with_tracer():
    try:
        torch.randn(3, requires_grad=True).numpy()
    except RuntimeError as e:
        found = diagnose(e)
    assert [f.code for f in found] == ["GT807"]
    with gradtrace.trace() as tr:
        try:
            w = torch.randn(3, requires_grad=True)
            w.add_(1)  # noqa: GT302 - the bug under test
        except RuntimeError as e:
            found = diagnose(e, tr)
    assert found[0].code.startswith("GT") and found[0].line == \
        test_diagnose_without_and_with_tracer.__code__.co_firstlineno + 9
    assert found[0] in tr.findings


def test_warning_shown_at_user_line(monkeypatch):
    seen: list[tuple[str, int]] = []
    monkeypatch.setattr(warnings, "showwarning",
                        lambda m, c, f, ln, file=None, line=None: seen.append((f, ln)))
    y = torch.randn(3, requires_grad=True) * 2  # noqa: GT305 - on purpose
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with gradtrace.trace():
            y.grad  # noqa: B018 - non-leaf .grad access warns
    line = test_warning_shown_at_user_line.__code__.co_firstlineno + 8
    assert seen == [(__file__, line)]


def test_nested_and_reused_tracer_rules():
    tr = gradtrace.trace()
    with tr:
        with pytest.raises(RuntimeError):
            tr.__enter__()
    with pytest.raises(RuntimeError):
        tr.__enter__()


def test_a_bug_of_ours_never_reaches_the_program(monkeypatch):
    monkeypatch.delenv("GRADTRACE_STRICT", raising=False)
    with gradtrace.trace() as tr:
        monkeypatch.setattr(tr.state, "on_inplace", None)  # recording now raises TypeError
        monkeypatch.setattr(tr.state, "on_backward_start", None)
        x = torch.randn(3, requires_grad=True)
        y = x * 2
        y.add_(1)
        y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    with pytest.raises(TypeError):
        with gradtrace.trace() as tr:
            monkeypatch.setattr(tr.state, "on_inplace", None)
            (torch.randn(3, requires_grad=True) * 2).add_(1)


def test_modules_built_per_call_do_not_pile_up():
    with gradtrace.trace() as tr:
        x = torch.randn(2, 3, requires_grad=True)
        for _ in range(3000):
            nn.ReLU()(x)
    assert len(tr.hooks.data.modules) < 2100
