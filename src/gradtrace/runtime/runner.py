"""``gradtrace run [--json-out FILE] [--quiet] [--report FILE] (script.py | -m module) [args...]``

Runs the program like ``python script.py`` (same ``sys.argv``, ``__main__``, ``sys.path[0]``,
stdin/stdout, exit code) under :func:`gradtrace.trace`. An uncaught exception prints the usual
traceback and then the diagnosis; at exit the silent problems are printed to stderr.
Exit codes: the program's own (1 for an uncaught exception), 2 for a gradtrace usage error.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Iterator

from gradtrace.errors import UsageError
from gradtrace.findings import Finding, findings_document

USAGE = ("gradtrace run [--json-out FILE] [--quiet] [--report FILE] [--check-sync N] "
         "(script.py | -m module) [args...]")
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# The last program's globals (or its exception), held until the next run or the interpreter's
# exit, as `python script.py` holds them: destroyed by us while the interpreter runs, a DDP
# model could hang the process. Its reducer's ~ProcessGroupGloo joins gloo's worker threads
# with the GIL held, and a worker still releasing the Python tensors of the last collective
# waits for the GIL (torch 2.13; 2 of ~230 runs of tests/distributed/scripts/
# late_sync_flag_ok.py under load 20, docs/triage/suite40.md). At exit Python no longer
# hands the GIL to such a thread.
_PROGRAM: list[Any] = []


@dataclass
class RunOptions:
    """Parsed command line of ``gradtrace run``."""

    target: str
    is_module: bool
    args: list[str] = field(default_factory=list)
    json_out: str | None = None
    report: str | None = None
    quiet: bool = False
    check_sync: int | None = None  # under torchrun: compare gradients across ranks every N steps


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gradtrace run", usage=USAGE, description=(
        "Run a Python program under gradient tracing; on an autograd error print the root "
        "cause, at exit print the silent gradient problems seen."))
    p.add_argument("--json-out", metavar="FILE", help="write the findings as JSON to FILE")
    p.add_argument("--report", metavar="FILE", help="write an HTML training report to FILE")
    p.add_argument("--quiet", action="store_true", help="print no findings (JSON/report only)")
    p.add_argument("--check-sync", metavar="N", type=int, help="under torchrun, check every N "
                   "optimizer steps that gradients are equal on all ranks")
    p.add_argument("-m", dest="module", metavar="module", help="run a library module as a script")
    p.add_argument("script", nargs="?", help="the script to run")
    return p


def parse_args(argv: list[str]) -> RunOptions:
    """Split ``argv`` into gradtrace options and the program's own arguments."""
    ours: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in ("--json-out", "--report", "--check-sync", "-m"):
            ours += argv[i:i + 2]
            i += 2
            if tok == "-m":
                break
            continue
        if tok.startswith(("--json-out=", "--report=", "--check-sync=")) or \
                tok in ("--quiet", "-h", "--help"):
            ours.append(tok)
            i += 1
            continue
        if tok.startswith("-") and tok != "-":
            raise UsageError(f"unknown option {tok!r}")
        ours.append(tok)
        i += 1
        break
    ns = _parser().parse_args(ours)
    if ns.check_sync is not None and ns.check_sync < 0:
        raise UsageError(f"--check-sync must be >= 0, got {ns.check_sync}")
    rest = argv[i:]
    if ns.module is not None:
        return RunOptions(ns.module, True, rest, ns.json_out, ns.report, ns.quiet, ns.check_sync)
    if not ns.script:
        raise UsageError("missing the script to run")
    return RunOptions(ns.script, False, rest, ns.json_out, ns.report, ns.quiet, ns.check_sync)


def should_print() -> bool:
    """Whether this process prints findings (rank 0 only under torchrun)."""
    from gradtrace.runtime.distributed.ranks import should_print as rank_prints

    return rank_prints()


def main(argv: list[str]) -> int:
    """Entry point of ``gradtrace run``; returns the exit code."""
    try:
        opts = parse_args(list(argv))
    except UsageError as e:
        print(f"usage: {USAGE}\ngradtrace run: error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    if not opts.is_module and not os.path.exists(opts.target):
        print(f"gradtrace run: error: cannot open script {opts.target!r}: no such file",
              file=sys.stderr)
        return 2
    for option, out in (("--json-out", opts.json_out), ("--report", opts.report)):
        folder = os.path.dirname(out or "")
        if folder and not os.path.isdir(folder):  # fail before the program runs, not after
            print(f"gradtrace run: error: {option} {out!r}: no such folder {folder!r}",
                  file=sys.stderr)
            return 2
    return _run(opts)


def _run(opts: RunOptions) -> int:
    from gradtrace.runtime.distributed.ranks import rank_session
    from gradtrace.runtime.trace.tracer import diagnose, diagnose_general, trace

    code, crash, keep = 0, None, None
    # `keep` holds the program's globals (or its exception and so its frames) until tracing
    # has ended, so the end-of-run analysis still sees the model and the optimizer.
    with contextlib.ExitStack() as stack:
        report = _maybe_report(opts, stack)
        tracer = stack.enter_context(trace())
        ranks = stack.enter_context(rank_session(tracer, check_sync=opts.check_sync))
        try:
            with _program_env(opts):
                keep = _execute(opts)
        except SystemExit as e:
            code, keep = _exit_code(e), e
        except KeyboardInterrupt as e:  # Ctrl-C: Python's traceback, without our frames
            keep = e
            stack.close()
            _print_traceback(e)
            _finish(opts, tracer.findings, report, crash=None, diagnosis=[])
            return 130  # what a shell shows for a Python program stopped by Ctrl-C
        except BaseException as e:  # the program crashed: Python's exit code is 1
            code, crash, keep = 1, e, e
            found = diagnose(e, tracer, general=False)
            if not ranks.diagnose(e) and not found:
                diagnose_general(e, tracer)  # NOTE [general crash]
    _PROGRAM[:] = [keep]
    del keep
    if crash is not None:
        _print_traceback(crash)
    _finish(opts, tracer.findings, report, crash, tracer.diagnosis if crash is not None else [])
    return code


def _execute(opts: RunOptions) -> dict[str, Any]:
    if opts.is_module:
        return runpy.run_module(opts.target, run_name="__main__", alter_sys=True)
    path = os.path.abspath(opts.target)
    if not os.path.isfile(path) or not path.endswith(".py"):
        return runpy.run_path(path, run_name="__main__")  # a directory or zip with __main__.py
    return _run_main_file(path)


def _run_main_file(path: str) -> dict[str, Any]:
    """Execute ``path`` as ``__main__`` the way ``python path`` does (argv[0] left as given)."""
    import io
    import types

    with io.open_code(path) as fh:
        data = fh.read()
    _check_encoding(data, path)
    code = compile(data, path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __builtins__=__builtins__, __cached__=None,
                           __loader__=None, __spec__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
    return module.__dict__


def _check_encoding(data: bytes, path: str) -> None:
    """Raise the SyntaxError ``python path`` raises on bytes its declared encoding cannot read.

    ``compile()`` on bytes is laxer than Python's script reader (it accepts, for instance, a
    Latin-1 byte in a comment of a file without an encoding declaration).
    """
    import codecs
    import tokenize

    if data.startswith(codecs.BOM_UTF8):
        return
    cookie = None
    for line in data.split(b"\n", 2)[:2]:
        match = tokenize.cookie_re.match(line.decode("latin-1"))
        if match:
            cookie = match.group(1)
            break
        if not tokenize.blank_re.match(line):
            break
    try:
        if cookie is None:
            data.decode("utf-8")
        elif codecs.lookup(cookie).name != "utf-8":
            data.decode(cookie)
    except LookupError:
        return  # compile() reports an unknown encoding as Python does
    except UnicodeDecodeError as e:
        if cookie is not None:
            raise SyntaxError(f"encoding problem: {cookie}") from None
        line = data.count(b"\n", 0, e.start) + 1
        raise SyntaxError(
            f"Non-UTF-8 code starting with '\\x{data[e.start]:02x}' in file {path} on line "
            f"{line}, but no encoding declared; see https://peps.python.org/pep-0263/ for "
            "details") from None


@contextlib.contextmanager
def _program_env(opts: RunOptions) -> Iterator[None]:
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    if opts.is_module:
        sys.argv = [opts.target, *opts.args]
        first = os.getcwd()
    else:
        sys.argv = [opts.target, *opts.args]
        first = os.path.dirname(os.path.abspath(opts.target))
    if sys.path:
        sys.path[0] = first
    else:
        sys.path.insert(0, first)
    try:
        yield
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _maybe_report(opts: RunOptions, stack: contextlib.ExitStack) -> Any:
    if not opts.report:
        return None
    try:
        from gradtrace.runtime.watch.watcher import watch_all

        return stack.enter_context(watch_all())
    except Exception as e:  # the report is optional; the run goes on
        print(f"gradtrace run: --report unavailable ({type(e).__name__}: {e}); running "
              "without it", file=sys.stderr)
        return None


def _print_traceback(exc: BaseException) -> None:
    from gradtrace.runtime.frames import hide_own_frames

    hide_own_frames(exc)
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _strip_ours(te)
    sys.stderr.write("".join(te.format()))
    sys.stderr.flush()


def _strip_ours(te: traceback.TracebackException, depth: int = 0) -> None:
    keep = [fs for fs in te.stack if not fs.filename.startswith(_PKG_DIR)
            and not fs.filename.endswith((os.sep + "runpy.py", "<frozen runpy>"))
            and not (fs.filename.endswith("overrides.py") and fs.name == "handle_torch_function")]
    te.stack = traceback.StackSummary.from_list(keep)
    for nxt in (te.__cause__, te.__context__):
        if nxt is not None and depth < 8:
            _strip_ours(nxt, depth + 1)


def _finish(opts: RunOptions, findings: list[Finding], report: Any,
            crash: BaseException | None, diagnosis: list[Finding]) -> None:
    from gradtrace.runtime.distributed.ranks import crash_explained, merge_ranks
    from gradtrace.runtime.render import order

    ordered = order(merge_ranks(findings, crash))  # rank 0: all ranks merged
    diagnosis = [*diagnosis, *crash_explained()]  # spawned ranks' diagnoses
    if opts.json_out and should_print():
        _write_json(opts.json_out, ordered)
    if report is not None:
        try:
            with_findings(report.report, ordered).save_html(opts.report)
        except Exception as e:
            print(f"gradtrace run: could not write the report to {opts.report!r}: {e}",
                  file=sys.stderr)
    if opts.quiet or not should_print():
        return
    sys.stderr.write(_sections(ordered, crash, diagnosis))


def with_findings(rep: Any, ordered: list[Finding]) -> Any:
    """The watch report with what the run printed first. A watch card saying only that
    parameters got no gradient (GT850) is left out when the run names, for each of them, the
    line and the mechanism."""
    import dataclasses
    import re

    explained = " ".join(f.message for f in ordered if "never received a gradient" in f.message)
    kept = []
    for f in rep.findings:
        listed = re.search(r"\): (.*?) got ", f.message) if f.code == "GT850" else None
        names = re.findall(r"`([\w.]+)`", listed.group(1)) if listed else []
        if names and all(f".{n}" in explained for n in names):
            continue
        if f not in ordered:
            kept.append(f)
    return dataclasses.replace(rep, findings=(*ordered, *kept))


def _sections(ordered: list[Finding], crash: BaseException | None,
              diagnosis: list[Finding]) -> str:
    """The printed report: the diagnosis of the crash (only findings that explain it), the
    problems the run saw, then what only the code shows (NOTE [ranking] in runtime.fuse)."""
    from gradtrace.runtime.fuse import GENERAL_CRASH
    from gradtrace.runtime.render import render_text

    explains = {(f.code, f.path, f.line) for f in diagnosis}
    diag = [f for f in ordered if (f.code, f.path, f.line) in explains]
    seen = [f for f in ordered if f not in diag and f.source != "static"]
    static = [f for f in ordered if f not in diag and f.source == "static"]
    out = []
    general = bool(diag) and all(f.code == GENERAL_CRASH for f in diag)
    apart = ""
    if general and seen:  # NOTE [general crash]: what the run saw leads the error itself
        out.append(render_text(seen, title=f"\ngradtrace: problems seen ({len(seen)})"))
        seen, apart = [], ", separate from the problems above"
    if general:  # no finding explains the error: it is not headed as a diagnosis
        out.append(render_text(diag, title=f"\ngradtrace: the error itself{apart} ({len(diag)})"
                               ": no specific diagnosis applies"))
    elif diag:
        out.append(render_text(diag, title=f"\ngradtrace: diagnosis ({len(diag)})"))
    if seen:
        title = "problems seen" if crash is None else \
            "also seen" if diag else "problems seen, separate from the error above"
        out.append(render_text(seen, title=f"\ngradtrace: {title} ({len(seen)})"))
    if static:
        out.append(render_text(static, title="\ngradtrace: found by reading the code that ran"
                               f" ({len(static)})"))
    return "".join(out)


def _write_json(path: str, findings: list[Finding]) -> None:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(findings_document(findings), fh, indent=2)
            fh.write("\n")
    except OSError as e:
        print(f"gradtrace run: cannot write --json-out {path!r}: {e.strerror}", file=sys.stderr)
