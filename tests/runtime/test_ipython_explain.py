"""%load_ext gradtrace in a real IPython shell; gradtrace.explain() on tensors and errors."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.runtime.explain import Explanation


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
    assert re.search(r":2:\d+: GT107", text)  # the detach line of the cell
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
