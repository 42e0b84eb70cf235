"""pytest plugin (entry point ``pytest11``, name ``gradtrace``): autograd diagnoses in CI.

* ``pytest --gradtrace`` (or ``gradtrace = true`` in the ini file) runs every test's call
  phase under ``gradtrace.trace()``. When such a test fails, its failure report gets a
  ``gradtrace diagnosis`` section: the diagnosis of the autograd error it raised (root-cause
  line, mechanism, fix), followed by the silent problems the tracer saw (a parameter that never
  got a gradient and the line where its graph was cut, ...).
* ``@pytest.mark.gradtrace`` does the same for one test (or class/module via ``pytestmark``).
  When any test was traced, the terminal summary ends with ``gradtrace: traced N test(s);
  M failure(s) diagnosed``.
* The ``gradtrace_watch`` fixture is a factory: ``w = gradtrace_watch(model, optimizer=None,
  **kwargs)`` starts ``gradtrace.watch(model, optimizer, **kwargs)`` and returns the watcher
  (read ``w.report``). Every watcher it started is closed at teardown; if the test fails, each
  watcher's report summary is added to the failure report (a ``gradtrace watch`` section).

Importing this module never imports torch: it loads in every pytest session of every user.
torch (and gradtrace's runtime) is imported only when a test is traced or the fixture is used.
Tracing problems never fail a test by themselves: they become a ``PytestWarning``.

Example::

    @pytest.mark.gradtrace
    def test_train_step():
        model = Net()
        loss = model(x).sum()
        loss.backward()
        assert model.head.weight.grad is not None   # on failure: why it is None, and where
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Generator, Iterator

import pytest

LOG = logging.getLogger(__name__)
_DIAGNOSIS = pytest.StashKey[str]()
_WATCHERS = pytest.StashKey[list]()
_WARNED = pytest.StashKey[bool]()
_COUNTS = pytest.StashKey[list]()  # [traced tests, diagnosed failures]
_SECTION = "gradtrace diagnosis"
_WATCH_SECTION = "gradtrace watch"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--gradtrace`` and the ``gradtrace`` ini option."""
    group = parser.getgroup("gradtrace", "gradtrace: where gradients stop flowing")
    group.addoption("--gradtrace", action="store_true", default=False, dest="gradtrace",
                    help="trace every test with gradtrace; a failing test's report gets the "
                         "diagnosis of its autograd problem")
    parser.addini("gradtrace", type="bool", default=False,
                  help="trace every test with gradtrace (same as --gradtrace)")


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``gradtrace`` marker."""
    config.addinivalue_line(
        "markers", "gradtrace: trace this test with gradtrace (as --gradtrace does for every "
                   "test); its failure report gets the diagnosis of the autograd problem")


def _wanted(item: pytest.Item) -> bool:
    config = item.config
    return bool(config.getoption("gradtrace", False) or config.getini("gradtrace")
                or item.get_closest_marker("gradtrace") is not None)


def _warn_once(item: pytest.Item, text: str) -> None:
    if not item.config.stash.get(_WARNED, False):
        item.config.stash[_WARNED] = True
        item.warn(pytest.PytestWarning(f"gradtrace: {text}"))


def _start(item: pytest.Item) -> Any:
    """Enter a tracer for this test, or None (with one warning) if tracing is unavailable."""
    try:
        from gradtrace.runtime.trace.tracer import trace

        tracer = trace()
        tracer.__enter__()
    except Exception as exc:  # never fail a test because tracing could not start
        _warn_once(item, f"tracing unavailable, tests run untraced ({type(exc).__name__}: {exc})")
        return None
    return tracer


def _stop(item: pytest.Item, tracer: Any, exc: BaseException | None) -> None:
    if tracer is None:
        return
    try:
        tracer.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
    except Exception as err:
        _warn_once(item, f"the tracer failed to stop cleanly ({type(err).__name__}: {err})")


# Old-style hookwrappers (``hookwrapper=True``): they work with every pluggy pytest 7+
# ships, and this module is loaded by every pytest session of every user.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    """Run the test body under ``gradtrace.trace()`` when asked to; keep the diagnosis."""
    if not _wanted(item):
        yield
        return
    tracer = _start(item)
    counts = item.config.stash.setdefault(_COUNTS, [0, 0])
    counts[0] += tracer is not None
    outcome = yield
    exc = outcome.excinfo[1] if outcome.excinfo else None
    _stop(item, tracer, exc)
    if isinstance(exc, Exception):  # not skip/xfail/exit outcomes
        text = diagnosis_text(exc, tracer)
        if text:
            item.stash[_DIAGNOSIS] = text
            counts[1] += 1


def diagnosis_text(exc: BaseException, tracer: Any) -> str:
    """The diagnosis of ``exc`` plus the tracer's silent findings, as plain text ('' if none)."""
    try:
        from gradtrace.runtime.trace.tracer import diagnose

        found = list(diagnose(exc, tracer))
        if tracer is not None:
            found += [f for f in tracer.findings if f not in found]
            if not found and "grad" in str(exc) and not _from_flow_check(exc):
                found = unreached_parameters(tracer)
    except Exception:  # a diagnosis must never hide the test's own failure
        LOG.debug("gradtrace: diagnosis failed", exc_info=True)
        return ""
    return render(found)


def _from_flow_check(exc: BaseException) -> bool:
    """``assert_gradients_flow`` failed: its message is the diagnosis, and it restored every
    ``.grad`` to its value before the check, so ``.grad`` says nothing about what flowed."""
    from gradtrace.testing.flow import GradientFlowError

    return isinstance(exc, GradientFlowError)


def unreached_parameters(tracer: Any) -> list[Any]:
    """Why each trainable parameter of the modules that ran got no gradient (after a backward).

    The tracer reports these by itself only for parameters an optimizer stepped; a failing
    test that inspects ``.grad`` directly needs them too.
    """
    state = getattr(tracer, "state", None)
    data = getattr(getattr(tracer, "hooks", None), "data", None)
    if state is None or data is None or not getattr(state, "backward_count", 0):
        return []
    out: list[Any] = []
    seen: set[int] = set()
    for rec in list(getattr(data, "modules", {}).values()):
        module = rec.ref()
        for p in [] if module is None else module.parameters():  # with unused children
            if p is None or id(p) in seen or not p.requires_grad or p.grad is not None:
                continue
            seen.add(id(p))
            f = tracer.why_no_grad(p)
            if f is not None and f not in out:
                out.append(f)
    return out


def render(findings: list[Any]) -> str:
    """The runtime's text rendering (source line, related places, help)."""
    from gradtrace.runtime.render import render_text

    return render_text(findings).rstrip("\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]
                              ) -> Generator[None, Any, None]:
    """Add the diagnosis (and watch summaries) to a failed test's call report."""
    outcome = yield
    rep = outcome.get_result()
    if call.when != "call" or not rep.failed:
        return
    text = item.stash.get(_DIAGNOSIS, "")
    if text:
        rep.sections.append((_SECTION, text))
    for w in item.stash.get(_WATCHERS, []):
        try:
            rep.sections.append((_WATCH_SECTION, w.report.summary()))
        except Exception:  # the summary is a bonus
            LOG.debug("gradtrace: watch summary failed", exc_info=True)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line when tests were traced: how many, and how many failures got a diagnosis."""
    counts = config.stash.get(_COUNTS, None)
    if counts and counts[0]:
        terminalreporter.write_line(f"gradtrace: traced {counts[0]} test(s); "
                                    f"{counts[1]} failure(s) diagnosed")


@pytest.fixture
def gradtrace_watch(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Factory fixture: ``w = gradtrace_watch(model, optimizer=None, **kwargs)``.

    Starts ``gradtrace.watch(model, optimizer, **kwargs)`` and returns the watcher; read
    ``w.report`` for the report. Every watcher started is closed at teardown; if the test
    fails, each watcher's summary is added to the failure report.
    """
    watchers: list[Any] = []
    request.node.stash[_WATCHERS] = watchers

    def start(model: Any, optimizer: Any = None, **kwargs: Any) -> Any:
        try:
            from gradtrace.runtime.watch.watcher import watch
        except ImportError as exc:
            raise RuntimeError(f"gradtrace_watch: gradtrace.watch is not available ({exc})") \
                from exc
        w = watch(model, optimizer, **kwargs)
        watchers.append(w)
        return w

    yield start
    for w in reversed(watchers):
        w.close()
