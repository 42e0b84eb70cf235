"""gradtrace.graph: DOT text, rendering through real Graphviz, clear errors, big models."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.errors import GradtraceError
from tests.report.resnet import ResNet50
from tests.watch.models import Branchy, TwoHead

DOT = shutil.which("dot")


@pytest.fixture(scope="module")
def resnet_out() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    m = ResNet50(classes=10)
    return m, m(torch.randn(2, 3, 32, 32)).sum()


def test_resnet50_collapses_to_a_readable_graph_in_seconds(
        resnet_out: tuple[nn.Module, torch.Tensor], tmp_path: Path) -> None:
    m, out = resnet_out
    t0 = time.perf_counter()
    g = gradtrace.graph(out, m)
    build = time.perf_counter() - t0
    assert g.collapsed and 15 <= g.nodes <= 40  # blocks, not ~500 autograd nodes
    for name in ("conv1 (Conv2d)", "layer1.0 (Bottleneck)", "layer3.5 (Bottleneck)",
                 "layer4.2 (Bottleneck)", "fc (Linear)"):
        assert name in g.dot
    assert g.unreached == []
    assert build < 5.0
    if DOT is None:
        pytest.skip("Graphviz `dot` not installed")
    t0 = time.perf_counter()
    svg = g.save(tmp_path / "r50.svg")
    png = g.save(tmp_path / "r50.png")
    assert time.perf_counter() - t0 < 30.0
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg")) and "layer2.3" in svg.read_text()
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_expanded_graph_names_parameters(resnet_out: tuple[nn.Module, torch.Tensor]) -> None:
    m, out = resnet_out
    g = gradtrace.graph(out, m, collapse=False)
    assert not g.collapsed and g.nodes > 300
    assert '"layer1.0.conv1.weight\\n(64, 64, 1, 1)"' in g.dot
    assert "Convolution\\nlayer1.0.conv1" in g.dot


def test_model_is_found_without_passing_it_and_unreached_params_are_marked() -> None:
    m = TwoHead()
    out = m(torch.randn(4, 8)).sum()
    g = gradtrace.graph(out)  # model looked up from the parameters
    assert "body (Sequential)" in g.dot and "head (Linear)" in g.dot
    assert g.unreached == ["aux_head.weight", "aux_head.bias"]
    assert "aux_head: no gradient reaches 2 param(s)" in g.dot

    b = Branchy(detach=True)
    g2 = gradtrace.graph(b(torch.randn(2, 8)).sum(), b)
    assert set(g2.unreached) == {"side.0.weight", "side.0.bias", "side.2.weight", "side.2.bias"}


def test_tensor_without_graph_is_a_clear_error() -> None:
    with pytest.raises(GradtraceError, match="no autograd graph.*does not require grad"):
        gradtrace.graph(torch.ones(3))
    with torch.no_grad():
        y = nn.Linear(2, 2)(torch.ones(1, 2))
    with pytest.raises(GradtraceError, match="no_grad"):
        gradtrace.graph(y)
    with pytest.raises(TypeError, match="expects a tensor"):
        gradtrace.graph([1, 2])  # type: ignore[arg-type]


def test_missing_dot_gives_a_message_not_a_traceback(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    m = TwoHead()
    g = gradtrace.graph(m(torch.randn(2, 8)).sum(), m)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on this PATH
    with pytest.raises(GradtraceError, match="apt-get install graphviz") as exc:
        g.save(tmp_path / "g.svg")
    assert "g.svg" in str(exc.value)
    assert g.save(tmp_path / "g.dot").read_text() == g.dot  # text needs no Graphviz
    with pytest.raises(GradtraceError, match="use a .svg, .png, .pdf or .dot"):
        g.save(tmp_path / "g.jpeg")
    assert os.environ["PATH"] == str(tmp_path)


def test_graph_marks_where_tracing_saw_the_cut() -> None:
    import tests.watch.models as models

    b = Branchy(detach=True)
    with gradtrace.trace():
        out = b(torch.randn(2, 8)).sum()
        g = gradtrace.graph(out, b)
    src = open(models.__file__).read().splitlines()
    line = next(i for i, s in enumerate(src, 1) if "s.detach()" in s)
    assert f"graph cut at models.py:{line}: `detach`" in g.dot
    assert "side: no gradient reaches 4 param(s)" in g.dot
    # without tracing the unreached branch is still drawn, without a location
    g2 = gradtrace.graph(b(torch.randn(2, 8)).sum(), b)
    assert "side: no gradient reaches 4 param(s)\"" in g2.dot
