"""The gradtrace pytest plugin, through the real pytest (``pytester``)."""
from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]


# The inner runs never import these; each imports a training framework (Lightning: ~4 s of CPU,
# transformers' Trainer ~3.5 s), and the Lightning callback subclasses the Callback of each
# Lightning package imported when it is first imported: imported here, before
# pytorch_lightning, it would miss that base for the rest of the worker
# (tests/integrations/test_lightning.py imports both packages, then the callback).
_FRAMEWORK_CALLBACKS = ("gradtrace.integrations.lightning", "gradtrace.integrations.transformers")


@pytest.fixture(autouse=True, scope="module")
def _warm_imports() -> None:
    """Import, in this process, everything the in-process runs below import lazily.

    ``pytester.runpytest`` (in-process) removes from ``sys.modules`` every module first
    imported during the inner run; re-importing torch's C-backed submodules later crashes the
    interpreter (and a second copy of a gradtrace module splits its state). So the inner runs
    must find them already imported.
    """
    import importlib
    import pkgutil

    import torch
    from torch import nn

    import gradtrace
    from gradtrace.pytest_plugin import diagnosis_text

    for info in pkgutil.walk_packages(gradtrace.__path__, "gradtrace."):
        if info.name.endswith("__main__") or info.name in _FRAMEWORK_CALLBACKS:
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # optional extras (rich, matplotlib, IPython) may be missing
            pass
    m = nn.Linear(2, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with gradtrace.watch(m, opt) as w:
        with gradtrace.trace() as tr:
            try:
                with torch.no_grad():  # noqa: GT201 (the warm-up raises on purpose)
                    out = m(torch.randn(3, 2))
                out.sum().backward()
            except RuntimeError as exc:
                diagnosis_text(exc, tr)
            opt.zero_grad()
            m(torch.randn(3, 2)).sum().backward()
            opt.step()
    w.report.summary()


MODEL = """
    import pytest
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.head = nn.Linear(4, 1)

        def forward(self, x):
            h = self.body(x).detach()  # <- cut
            return self.head(h)
"""

TESTS = MODEL + """
    def test_body_gets_grad():
        m = Net()
        m(torch.randn(3, 4)).sum().backward()
        assert m.body.weight.grad is not None

    def test_backward_under_no_grad():
        m = Net()
        with torch.no_grad():  # <- off
            out = m(torch.randn(3, 4))
        out.sum().backward()

    def test_passes():
        m = Net()
        m(torch.randn(3, 4)).sum().backward()
        assert m.head.weight.grad is not None

    def test_skipped():
        pytest.skip("not today")
"""


# Other installed plugins re-import their modules in every in-process run; keep them out.
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*QUIET, *args)


def _line(path, marker: str) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, t in enumerate(lines, 1) if t.rstrip().endswith(f"# <- {marker}"))


def _col(path, line: int, expr: str) -> int:
    """1-based column of ``expr`` on ``line``: where a runtime finding points."""
    return path.read_text().splitlines()[line - 1].index(expr) + 1


def _section(result: pytest.RunResult, test: str) -> str:
    """The text of the 'gradtrace diagnosis' section of ``test``'s failure ('' if none)."""
    text = result.stdout.str()
    start = text.find(f"_ {test} _")
    if start < 0:
        return ""
    end = text.find("\n____", start + 1)
    block = text[start:end if end > 0 else None]
    at = block.find("- gradtrace diagnosis -")
    return block[at:] if at >= 0 else ""


def test_option_puts_the_diagnosis_in_the_failure_report(pytester: pytest.Pytester) -> None:
    path = pytester.makepyfile(test_model=TESTS)
    cut_line, off_line = _line(path, "cut"), _line(path, "off")
    result = _run(pytester, "--gradtrace")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    cut = _section(result, "test_body_gets_grad")
    assert re.search(rf"test_model.py:{cut_line}:\d+: GT\d{{3}} ", cut)
    assert "Net.body.weight" in cut and "`detach`" in cut
    result.stdout.fnmatch_lines(["gradtrace: traced 4 test(s); 2 failure(s) diagnosed"])
    crash = _section(result, "test_backward_under_no_grad")
    # the head's linear ran under no_grad: the `with` line is named, the run's evidence attached
    assert re.search(rf"test_model.py:{off_line}:\d+: GT201 ", crash), crash
    assert re.search(rf"test_model.py:{off_line}: confirmed at run time .*has no grad_fn",
                     crash), crash
    assert f"test_model.py:{cut_line + 1}: `linear` ran here with grad mode off" in crash
    assert "compute the training forward pass outside torch.no_grad()" in crash


def test_without_option_or_marker_there_is_no_section(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=TESTS)
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    assert "gradtrace diagnosis" not in result.stdout.str()
    assert "gradtrace: traced" not in result.stdout.str()


def test_ini_option_turns_tracing_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=TESTS)
    pytester.makeini("[pytest]\ngradtrace = true\n")
    result = _run(pytester, "-k", "no_grad")
    result.assert_outcomes(failed=1, deselected=3)
    assert "has no grad_fn" in _section(result, "test_backward_under_no_grad")


def test_marker_traces_only_the_marked_test(pytester: pytest.Pytester) -> None:
    marked = TESTS.replace("    def test_body_gets_grad():",
                           "    @pytest.mark.gradtrace\n    def test_body_gets_grad():")
    path = pytester.makepyfile(test_model=marked)
    result = _run(pytester, "--strict-markers")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    cut = _section(result, "test_body_gets_grad")
    line = _line(path, "cut")
    col = _col(path, line, "self.body(x)")
    assert re.search(rf"test_model.py:{line}:{col}: GT\d{{3}} Net.body.weight", cut)
    assert _section(result, "test_backward_under_no_grad") == ""


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.gradtrace: trace this test with gradtrace*"])
    help_text = _run(pytester, "--help").stdout.str()
    assert "--gradtrace" in help_text


def test_plain_assertion_failures_get_no_section(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="""
        import torch
        def test_numbers():
            assert torch.ones(2).sum().item() == 3.0
    """)
    result = _run(pytester, "--gradtrace")
    result.assert_outcomes(failed=1)
    assert "gradtrace diagnosis" not in result.stdout.str()


def test_watch_fixture_returns_a_watcher_and_reports_on_failure(pytester: pytest.Pytester
                                                                ) -> None:
    pytester.makepyfile(test_watching=MODEL + """
    WATCHERS = []

    def _train(gradtrace_watch):
        m = Net()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        w = gradtrace_watch(m, opt)
        WATCHERS.append(w)
        for _ in range(2):
            opt.zero_grad()
            m(torch.randn(3, 4)).sum().backward()
            opt.step()
        return w

    def test_watch_passes(gradtrace_watch):
        w = _train(gradtrace_watch)
        assert not w.closed and len(w.report.tracks) == 1

    def test_watch_fails(gradtrace_watch):
        _train(gradtrace_watch)
        assert False, "boom"

    def test_watchers_were_closed():
        assert len(WATCHERS) == 2 and all(w.closed for w in WATCHERS)
    """)
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    text = result.stdout.str()
    assert "- gradtrace watch -" in text and "NO GRADIENT" in text
    assert text.count("- gradtrace watch -") == 1


def test_plugin_import_does_not_import_torch(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import sys

        def pytest_terminal_summary(terminalreporter, config):
            terminalreporter.write_line(
                f"GRADTRACE_LOADED={config.pluginmanager.hasplugin('gradtrace')} "
                f"TORCH_IMPORTED={'torch' in sys.modules}")
    """)
    pytester.makepyfile(test_plain="""
        def test_plain():
            assert 1 + 1 == 2
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["GRADTRACE_LOADED=True TORCH_IMPORTED=False"])


def test_unavailable_tracing_warns_once_and_runs_the_tests(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "gradtrace.runtime.trace.tracer", None)  # import now fails
    pytester.makepyfile(test_two="""
        def test_a():
            assert 1 == 2

        def test_b():
            pass
    """)
    result = _run(pytester, "--gradtrace")
    result.assert_outcomes(passed=1, failed=1, warnings=1)
    result.stdout.fnmatch_lines(["*PytestWarning: gradtrace: tracing unavailable, tests run "
                                 "untraced (ModuleNotFoundError*"])
    assert "gradtrace diagnosis" not in result.stdout.str()


FLOW = """
    import torch
    from torch import nn
    from gradtrace.testing import assert_gradients_flow

    class Aux(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.main, self.aux = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x):
            h = self.body(x)
            return self.main(h) + self.aux(h).detach()

    class Spare(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.spare = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x):
            return self.b(self.a(x))

    def test_aux_helper():
        assert_gradients_flow(Aux(), (torch.randn(3, 4), lambda o: o.sum()))

    def test_spare_helper():
        assert_gradients_flow(Spare(), (torch.randn(3, 4), lambda o: o.sum()))

    def test_spare_by_hand():
        m = Spare()
        m(torch.randn(3, 4)).sum().backward()
        assert m.a.weight.grad is not None and m.spare.weight.grad is not None
"""


def test_flow_helper_failures_blame_only_the_parameters_without_gradient(
        pytester: pytest.Pytester) -> None:
    """The helper restores every .grad, so the plugin must not read .grad after it failed."""
    pytester.makepyfile(test_helper_blames=FLOW)  # a name no other test module has
    result = _run(pytester, "--gradtrace")
    result.assert_outcomes(failed=3)
    text = result.stdout.str()
    assert "aux.weight, aux.bias: grad is None" in text
    assert "spare.weight, spare.bias: grad is None: not used in the forward pass" in text
    for test in ("test_aux_helper", "test_spare_helper"):
        assert _section(result, test) == ""  # no false "never received a gradient"
    by_hand = _section(result, "test_spare_by_hand")
    assert "Spare.spare.weight never received a gradient" in by_hand
    assert "Spare.a." not in by_hand and "Spare.b." not in by_hand


def test_tracebacks_do_not_show_gradtrace_frames(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=TESTS)
    result = _run(pytester, "--gradtrace", "--tb=long", "-k", "no_grad")
    result.assert_outcomes(failed=1, deselected=3)
    text = result.stdout.str()
    assert "has no grad_fn" in text
    frames = re.findall(r"^(\S+\.py):\d+: ", text, re.M)  # the traceback's entries
    assert frames and not [f for f in frames if "gradtrace" in f or f.endswith("overrides.py")]
    assert text.count("_tensor.py:") == 1  # Tensor.backward once, as without gradtrace
