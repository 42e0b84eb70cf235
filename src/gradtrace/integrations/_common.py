"""What the Lightning and Hugging Face callbacks share: one training run seen by gradtrace.

A :class:`Session` composes the public pieces (``gradtrace.trace()`` for the first optimizer
steps, ``gradtrace.watch`` for the whole run, the one :class:`~gradtrace.findings.Finding`
model and the watch :class:`~gradtrace.report.model.Report`); the trainer adapters only say
*when* an optimizer step is about to happen and when it is done.

# NOTE [which gradients are logged]
The flow metrics are measured at the trainer's "before optimizer step" point, once per
optimizer step (never per micro-batch under gradient accumulation): Lightning's
``on_before_optimizer_step`` (gradients unscaled under AMP, before gradient clipping) and the
Hugging Face ``on_pre_optimizer_step`` (after clipping; on transformers without that event, a
step pre-hook on the torch optimizer, the same point). The update-to-weight ratio compares the
weights right before and right after that step.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from gradtrace.env import strict
from gradtrace.errors import GradtraceError
from gradtrace.findings import Finding
from gradtrace.integrations._flow import FlowMeter

LOG = logging.getLogger("gradtrace.integrations")
TRACE_STEPS = 3  # optimizer steps traced by gradtrace.trace() (the never-graded check)
REPORT_NAME = "gradtrace.html"


class NoGradientError(GradtraceError):
    """``fail_fast=True``: trainable parameters got no gradient at the first optimizer step."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        from gradtrace.runtime.render import render_text

        self.findings = list(findings)
        super().__init__("trainable parameters received no gradient at the first optimizer "
                         "step (fail_fast=True):\n" + render_text(self.findings))


def check_options(watch: Any, every: Any, report: Any, fail_fast: Any) -> None:
    """Validate the callback's constructor arguments (ValueError naming the bad value)."""
    if every is not None and (not isinstance(every, int) or isinstance(every, bool)
                              or every < 1):
        raise ValueError(f"every must be None (the trainer's logging interval) or a positive "
                         f"int, got {every!r}")
    if report is not None and report is not False \
            and not isinstance(report, (str, os.PathLike)):
        raise ValueError(f"report must be None (default location), False or a path, got "
                         f"{report!r}")
    for name, value in (("watch", watch), ("fail_fast", fail_fast)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")


# ------------------------------------------------------------------------------ session
def merge_named(findings: list[Finding]) -> list[Finding]:
    """Merge per-parameter "X never received a gradient: why" findings with the same why."""
    marker = " never received a gradient"
    out: list[Finding] = []
    keyed: dict[tuple[Any, ...], int] = {}
    names: dict[int, list[str]] = {}
    for f in findings:
        head, sep, tail = f.message.partition(marker)
        if not sep:
            out.append(f)
            continue
        key = (f.code, f.path, f.line, f.related, f.fix, f.severity, tail)
        at = keyed.get(key)
        if at is None:
            keyed[key] = len(out)
            names[len(out)] = [head]
            out.append(f)
        else:
            names[at].append(head)
    for at, ns in names.items():
        if len(ns) > 1:
            shown = ", ".join(ns[:6]) + (f" and {len(ns) - 6} more" if len(ns) > 6 else "")
            f = out[at]
            out[at] = dataclasses.replace(f, message=shown + marker
                                          + f.message.partition(marker)[2])
    return out


class Session:
    """One training run: trace the first optimizer steps, watch the run, log the flow."""

    def __init__(self, *, watch: bool, every: int | None, fail_fast: bool,
                 trainer: str) -> None:
        self.watch_on = watch
        self.every = every
        self.fail_fast = fail_fast
        self.trainer = trainer
        self.tracer: Any = None
        self._model: Any = None
        self.ranks: Any = None  # the rank session (distributed runs)
        self._ranks_open = False
        self.watcher: Any = None
        self.meter: FlowMeter | None = None
        self.named: list[tuple[str, Any]] = []
        self.graded: set[int] = set()
        self.all_names: set[str] = set()
        self.steps = 0
        self.checked = False
        self.crash: list[Finding] = []
        self.no_grad: list[Finding] = []
        self.report: Any = None
        self.findings: list[Finding] = []
        self.logged: list[tuple[int, dict[str, float]]] = []
        self.pending: tuple[int, dict[str, float]] | None = None
        self.enabled = True
        self.finished = False
        self.printed = False

    # -- guarded calls ---------------------------------------------------------------------
    def guard(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; an internal failure disables gradtrace instead of breaking training."""
        if not self.enabled:
            return None
        try:
            return fn()
        except NoGradientError:
            raise
        except Exception:
            if strict():
                raise
            LOG.warning("gradtrace: internal error in the %s callback; gradtrace stops for "
                        "this run", self.trainer, exc_info=True)
            self.enabled = False
            self.close()
            return None

    @property
    def model(self) -> Any:
        """The trained model (None once it is gone)."""
        return self._model() if self._model is not None else None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, model: Any, watch_factory: Callable[[], Any] | None,
              ranks: Any = None, environ: Any = None) -> None:
        """Arm the tracer and the watch; call when training begins."""
        import gradtrace

        import weakref

        self._model = weakref.ref(model)
        self.named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.all_names = {n for n, _ in model.named_parameters()}
        self.meter = FlowMeter(self.named)
        self.tracer = gradtrace.trace()
        self.tracer.__enter__()
        if ranks is not None and ranks.distributed:
            from gradtrace.runtime.distributed.ranks import rank_session

            self.ranks = rank_session(self.tracer, check_sync=0, info=ranks, environ=environ)
            self.ranks.__enter__()
            self._ranks_open = True
        if self.watch_on and watch_factory is not None:
            self.watcher = watch_factory()

    def due(self, step: int, default: int | None) -> bool:
        """Is optimizer step ``step`` (0-based) one to log? ``default`` is the trainer's own
        logging interval, used when ``every`` is None (None or 0: never)."""
        every = self.every if self.every is not None else default
        return self.watch_on and bool(every) and (step + 1) % every == 0

    def before_step(self, step: int, log: bool) -> None:
        """At the before-optimizer-step point (gradients final); ``step`` labels the log."""
        self.steps += 1
        if not self.checked:
            self._check_graded()
        if log and self.meter is not None:
            self.pending = (step, self.meter.measure())

    def after_step(self) -> tuple[int, dict[str, float]] | None:
        """The metrics of the step just taken (None if it was not logged)."""
        pending, self.pending = self.pending, None
        if pending is None or self.meter is None:
            return None
        step, metrics = pending
        metrics.update(self.meter.updates())
        self.logged.append((step, metrics))
        return step, metrics

    def _check_graded(self) -> None:
        self.graded.update(id(p) for _, p in self.named if p.grad is not None)
        if self.fail_fast and self.steps == 1 and self._missing():
            self._explain()
            self.close()
            raise NoGradientError(self.no_grad)
        if self.steps >= TRACE_STEPS:
            self._explain()

    def _missing(self) -> list[Any]:
        return [p for _, p in self.named if id(p) not in self.graded]

    def _explain(self) -> None:
        """Name every trainable parameter that got no gradient, with why; print once."""
        if self.checked:
            return
        self.checked = True
        missing = self._missing() if self.steps else []
        found: list[Finding] = []
        tr = self.tracer
        names = {id(p): n for n, p in self.named}
        for p in missing:
            f = tr.why_no_grad(p) if tr is not None else None
            found.append(self._named(f, names[id(p)]))
        self.no_grad = merge_named(found)
        self._close_tracer()
        if self.no_grad and not self.printed and self.ranks is None:  # DDP: rank 0, merged
            self.printed = True
            from gradtrace.runtime.render import render_text

            print(render_text(self.no_grad, title=f"gradtrace ({self.trainer}): trainable "
                              f"parameters without a gradient in the first {self.steps} "
                              "optimizer step(s)"), file=sys.stderr)

    def _named(self, f: Finding | None, name: str) -> Finding:
        """A trace finding about one parameter, named by its qualified name in the trained
        model (the trainer calls ``training_step``, so the tracer may never see the root
        module run) and placed where the parent module assigns it when the tracer could not
        place it."""
        from gradtrace.runtime.build import display_path, make

        if f is None:
            return make("GT820", None, f"{name} never received a gradient in the first "
                        f"{self.steps} optimizer step(s)", severity="warning")
        head, sep, tail = f.message.partition(" never received a gradient")
        if sep:
            f = dataclasses.replace(f, message=f"{name}{sep}{tail} (traced: the first "
                                    f"{self.steps} optimizer step(s))")
        if f.path == "<unknown>" and self.model is not None:
            site = _assigned_at(self.model, name)
            if site is not None:
                f = dataclasses.replace(f, path=display_path(site.path), line=site.line)
        return f

    def _close_tracer(self, exc: BaseException | None = None) -> None:
        tr, self.tracer = self.tracer, None
        if tr is None:
            return
        info = (type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
        try:
            if self._ranks_open:
                self._ranks_open = False
                self.ranks.__exit__(*info)
        finally:
            tr.__exit__(*info)

    def close(self, exc: BaseException | None = None) -> None:
        """Remove every hook (tracer and watch); idempotent."""
        try:
            self._close_tracer(exc)
        finally:
            w, self.watcher = self.watcher, None
            if w is not None:
                w.close()
                self.report = w.report

    def finish(self, exc: BaseException | None = None) -> list[Finding]:
        """End of training (or an exception): close everything and collect the findings."""
        if self.finished:
            return self.findings
        self.finished = True
        try:
            if exc is not None and self.ranks is not None:
                self.crash = list(self.ranks.diagnose(exc))  # DDP errors, per rank
            if exc is not None and self.tracer is not None:
                self.crash += [f for f in self.tracer.diagnose(exc, general=not self.crash)
                               if f not in self.crash]
            if self.tracer is not None and self.steps and self.enabled:
                self._explain()  # also after a crash: e.g. the cause of a DDP error
        finally:
            self.close(exc)
        self.findings = self._collect()
        if self.ranks is not None:
            from gradtrace.runtime.distributed.ranks import merge_ranks

            merged = merge_ranks(self.findings, exc)  # rank 0: every rank's, labelled
            if self.ranks.info.is_zero or merged:
                self.findings = merged
        return self.findings

    def _collect(self) -> list[Finding]:
        """Most likely root cause first: the crash, the parameters cut off, then the watch's."""
        covered = {n for n, p in self.named if id(p) not in self.graded} if self.checked \
            else set()
        facts = getattr(self.ranks, "facts", None) or {}
        in_ddp = {p.get("name") for p in facts.get("params", ())}  # named by the DDP diagnosis
        no_grad = [f for f in self.no_grad
                   if not set(f.message.partition(" never")[0].split(", ")) <= in_ddp]
        out: list[Finding] = []
        for f in [*self.crash, *no_grad, *self._watch_findings(covered)]:
            if f not in out:
                out.append(f)
        return out

    def _watch_findings(self, covered: set[str]) -> list[Finding]:
        if self.report is None:
            return []
        out = []
        for f in self.report.findings:
            named = _names_in(f.message) & self.all_names
            if f.code == "GT850" and named and named <= covered:
                continue  # already named, with the reason, by the trace
            out.append(f)
        return out

    def announce(self, path: Path | None) -> None:
        """Print the findings not printed yet and where the report is (once, at the end)."""
        from gradtrace.runtime.render import render_text

        rest = [f for f in self.findings if f not in self.no_grad or not self.printed]
        text = render_text(rest, title=f"gradtrace ({self.trainer}): {len(rest)} finding(s)")
        if path is not None:
            text += f"gradtrace: report written to {path}\n"
        if text:
            print(text, end="", file=sys.stderr)

    def full_report(self) -> Any:
        """The watch's Report with every finding of the run (an empty one without a watch)."""
        from gradtrace.report.model import Report

        rep = self.report if self.report is not None else Report()
        meta = {**rep.meta, "trainer": self.trainer}
        return dataclasses.replace(rep, findings=tuple(self.findings), meta=meta)

    def write_report(self, path: Path) -> Path:
        """Write the HTML report (creating the directory)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return self.full_report().save_html(path)


def _assigned_at(model: Any, name: str) -> Any:
    """Where ``self.<attr> = ...`` creates the innermost module on the path of parameter
    ``name`` that a parent assigns by name (e.g. the unused head); None if not found."""
    from gradtrace.runtime.trace.hooks import attribute_site

    parts = name.split(".")[:-1]
    mods = dict(model.named_modules())
    for k in range(len(parts), 0, -1):
        parent = mods.get(".".join(parts[:k - 1]))
        if parent is not None and not parts[k - 1].isdigit():
            site = attribute_site(type(parent), parts[k - 1])
            if site is not None:
                return site
    return None


def _names_in(message: str) -> set[str]:
    """The `backticked` names of a watch finding's message."""
    parts = message.split("`")
    return {parts[i] for i in range(1, len(parts), 2)}


def report_path(report: Any, default_dir: str | os.PathLike | None) -> Path | None:
    """Where the HTML report goes: ``report`` if given (a directory gets ``gradtrace.html``),
    else ``default_dir/gradtrace.html``; None for ``report=False``."""
    if report is False:
        return None
    if report is not None:
        p = Path(report)
        return p / REPORT_NAME if p.is_dir() else p
    return Path(default_dir or ".") / REPORT_NAME


class CallbackCore:
    """What both trainer callbacks hold: options, the run's session and its results."""

    def _configure(self, watch: bool, every: int | None, report: Any,
                   fail_fast: bool) -> None:
        check_options(watch, every, report, fail_fast)
        self.watch = watch
        self.every = every
        self.report = report
        self.fail_fast = fail_fast
        self.findings: list[Finding] = []
        self.report_path: Path | None = None
        self._session: Session | None = None

    @property
    def logged(self) -> list[tuple[int, dict[str, float]]]:
        """``(step, metrics)`` of every logged step of the last run."""
        return self._session.logged if self._session is not None else []

    @property
    def watch_report(self) -> Any:
        """The run's :class:`~gradtrace.report.model.Report` (after training), or None."""
        s = self._session
        return s.full_report() if s is not None and s.finished else None

    def _new_session(self, trainer: str) -> Session:
        """A session for a new run (finishing one that never reached its end)."""
        if self._session is not None and not self._session.finished:
            self._session.finish()
        self._session = Session(watch=self.watch, every=self.every, fail_fast=self.fail_fast,
                                trainer=trainer)
        self.findings, self.report_path = [], None
        return self._session

    def _finish_run(self, exc: BaseException | None, is_zero: bool,
                    default_dir: Any) -> None:
        """Close the run; the main process writes the report and prints the findings."""
        s = self._session
        if s is None or s.finished:
            return
        self.findings = s.finish(exc)
        if not is_zero:
            return
        path = report_path(self.report, default_dir)
        if path is not None:
            self.report_path = s.guard(lambda: s.write_report(path)) or None
        s.announce(self.report_path)
