"""%load_ext gradtrace in a real IPython shell; gradtrace.explain() on tensors and errors."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.runtime.trace.explain import Explanation


@pytest.fixture
def shell():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    if "gradtrace" in ip.extension_manager.loaded:
        ip.run_line_magic("unload_ext", "gradtrace")
    InteractiveShell.clear_instance()


def test_load_ext_diagnoses_cell_error(shell, capsys):
    shell.run_line_magic("load_ext", "gradtrace")
    shell.run_cell("import torch, torch.nn as nn\nm = nn.Linear(3, 1)")
    res = shell.run_cell("x = torch.randn(2, 3)\nout = m(x).detach()\nout.sum().backward()")
    assert not res.success
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "element 0 of tensors does not require grad" in text
    assert "gradtrace: diagnosis" in text and "GT" in text
    assert ", line 2: GT107" in text  # the detach line of the cell, named as IPython does
    assert torch._C._len_torch_function_stack() == 0  # no mode left between cells


def test_unload_ext_removes_everything(shell, capsys):
    shell.run_line_magic("load_ext", "gradtrace")
    shell.run_line_magic("unload_ext", "gradtrace")
    res = shell.run_cell("import torch\ntorch.zeros(1).backward()")
    assert not res.success
    assert "gradtrace: diagnosis" not in capsys.readouterr().err
    assert not shell.events.callbacks["pre_run_cell"] or all(
        "gradtrace" not in getattr(cb, "__module__", "") for cb in
        shell.events.callbacks["pre_run_cell"])


def test_explain_tensor_cut_and_graph():
    m = nn.Linear(3, 1)
    with gradtrace.trace():
        out = m(torch.randn(2, 3))
        cut = out.detach()
        e = gradtrace.explain(cut)
        ok = gradtrace.explain(out)
    line = test_explain_tensor_cut_and_graph.__code__.co_firstlineno + 4
    assert isinstance(e, Explanation) and len(e.findings) == 1
    assert e.findings[0].line == line and f":{line}" in str(e)
    assert ok.findings == () and "AddmmBackward0" in str(ok) and f":{line - 1}" in str(ok)
    leaf = gradtrace.explain(m.weight)
    assert "leaf" in leaf.text and leaf.findings == ()


def test_explain_exception():
    try:
        torch.randn(4, requires_grad=True).mul(2).backward()
    except RuntimeError as exc:
        e = gradtrace.explain(exc)
    assert [f.code for f in e.findings] == ["GT510"] and "scalar" in str(e)
    with pytest.raises(TypeError):
        gradtrace.explain(3)


def test_cells_read_as_ipython_names_them_and_hide_our_frames(shell, capsys):
    """``%load_ext`` in the very cell that fails; then a later cell (issue 15)."""
    run = shell.run_cell("import torch, torch.nn as nn\nm = nn.Linear(3, 1)", store_history=True)
    n = run.execution_count + 1
    shell.run_cell("%load_ext gradtrace\nout = m(torch.randn(2, 3)).detach()\n"
                   "out.sum().backward()", store_history=True)
    first = capsys.readouterr()
    shell.run_cell("out = m(torch.randn(2, 3)).detach()\nout.sum().backward()",
                   store_history=True)
    later = capsys.readouterr()
    assert f"Cell In[{n}], line 3: GT800" in first.err  # not interactiveshell.py
    assert "     3 | out.sum().backward()" in first.err
    assert f"Cell In[{n + 1}], line 1: GT107" in later.err
    assert "     1 | out = m(torch.randn(2, 3)).detach()" in later.err
    assert f"--> Cell In[{n + 1}], line 2: backward() failed here" in later.err
    for text in (first.out + first.err, later.out + later.err):
        assert "interactiveshell.py" not in text.split("gradtrace: diagnosis")[1]
        assert "gradtrace/runtime" not in text and "overrides.py" not in text
        assert text.count("_tensor.py") == 1  # as without gradtrace: one Tensor.backward


def test_explain_and_graph_after_the_trace_block_use_the_last_trace():
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    with gradtrace.trace():
        h = m[0](torch.randn(2, 3)).detach()
        loss = m[1](h).sum()
        cut = h.sum()
    line = test_explain_and_graph_after_the_trace_block_use_the_last_trace.__code__\
        .co_firstlineno + 3
    e = gradtrace.explain(cut)
    assert [f.line for f in e.findings] == [line] and "run the code inside" not in str(e)
    assert f"graph cut at test_ipython_explain.py:{line}: `detach`" in gradtrace.graph(loss, m).dot
    untraced = m[1](m[0](torch.randn(2, 3)).detach()).sum()  # same code, after the block
    assert "graph cut at" not in gradtrace.graph(untraced, m).dot


def test_explain_exception_says_it_once(monkeypatch):
    # no session of an earlier test in this process: `explain` would read the last one's
    # findings (`last_tracer()`), which made this test depend on the tests run before it
    from gradtrace.runtime.trace import tracer as tracer_module

    monkeypatch.setattr(tracer_module, "_LAST", [])
    try:
        torch.zeros(3).sum().backward()
    except RuntimeError as exc:
        text = str(gradtrace.explain(exc, tracer=None))
    assert text.count("so autograd has nothing to differentiate") == 1
    assert text.startswith("RuntimeError: element 0 of tensors")
