"""Report value object: JSON round trip, text summary, self-contained HTML, PNG."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

import gradtrace
from gradtrace.report.model import Report
from tests.watch.models import LogNet, TwoHead, mlp, train
from tests.watch.test_watch_findings import _log_data


@pytest.fixture(scope="module")
def nan_report() -> Report:
    torch.manual_seed(0)
    m = LogNet()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 8, data=_log_data(5, 8))
    return w.report


@pytest.fixture(scope="module")
def head_report() -> Report:
    torch.manual_seed(0)
    m = TwoHead()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 12, d_in=8, d_out=2)
    return w.report


def test_json_round_trip_with_nan_and_none(nan_report: Report, head_report: Report) -> None:
    for rep in (nan_report, head_report):
        text = rep.to_json()
        doc = json.loads(text)  # strict JSON: NaN is encoded as a string
        assert doc["schema"] == 1 and doc["tool"] == "gradtrace"
        back = Report.from_json(text)
        assert back.to_json() == text
        assert back.tracks == rep.tracks or any(  # NaN != NaN, so compare via JSON as well
            math.isnan(x) for s in rep.tracks[0].steps for x in s.norm if x is not None)
        assert back.findings == rep.findings
    assert '"nan"' in nan_report.to_json()
    assert Report.from_json(head_report.to_json()) == head_report


def test_bad_schema_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unsupported gradtrace report schema 99"):
        Report.from_dict({"schema": 99})


def test_summary_lists_modules_and_findings(head_report: Report, nan_report: Report) -> None:
    text = head_report.summary(width=120)
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 3}
    assert "NO GRADIENT" in rows["aux_head"] and "ok" in rows["head"]
    assert "GT850" in text and "1 finding(s)" in text
    nan_text = nan_report.summary(width=200)
    assert "NaN/Inf" in nan_text and "GT851" in nan_text and "step 5" in nan_text


def test_html_is_one_self_contained_file(tmp_path: Path, nan_report: Report) -> None:
    path = nan_report.save_html(tmp_path / "r.html")
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", html)  # nothing external
    assert "<script" not in html
    assert html.count("<svg") >= 3  # flow bars, norm heat map, update heat map
    assert "GT851" in html and "gradients-became-non-finite" in html
    assert 'fill="#d62728"' in html  # the NaN step is drawn red
    assert "models.py:" in html  # the line that produced the NaN
    assert nan_report._repr_html_().startswith('<div class="gradtrace-report">')


def test_png_has_the_charts(tmp_path: Path, head_report: Report) -> None:
    pytest.importorskip("matplotlib")
    path = head_report.save_png(tmp_path / "r.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_empty_report_renders() -> None:
    m = mlp()
    with gradtrace.watch(m) as w:
        pass
    rep = w.report
    assert rep.findings == () and rep.tracks[0].total_steps == 0
    assert "0 finding(s)" in rep.summary()
    assert "No step was recorded" in rep._repr_html_()


def test_summary_without_rich_is_plain_text(head_report: Report,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "rich.console", None)  # makes `import rich...` fail
    text = head_report.summary()
    assert "┃" not in text and "│" not in text
    lines = text.splitlines()
    assert lines[0].startswith("== TwoHead: 12 steps")
    row = next(line for line in lines if line.startswith("aux_head "))
    assert row.rstrip().endswith("NO GRADIENT")
    assert any(": GT850 [warning] `aux_head` (Linear)" in line for line in lines)
