"""Command line: ``gradtrace check | rules | explain | run | demo | server``; no torch import.

Exit codes (all subcommands except ``run``, which returns the script's own exit code):
  0  no findings
  1  findings (or, with --fix/--diff, changes that remain or would be made)
  2  usage, configuration or internal error (bad option, missing path, a rule crashed)
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from gradtrace._version import __version__
from gradtrace.errors import GradtraceError

EPILOG = """exit codes:
  0  no findings
  1  findings reported
  2  usage or configuration error, a path that does not exist, or an internal error
`gradtrace run` exits with the script's own exit code (2 if gradtrace cannot start it)."""


def _split(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree (``run`` is parsed by the runtime itself)."""
    p = argparse.ArgumentParser(
        prog="gradtrace", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Find where gradients stop flowing in PyTorch code, and say why.")
    p.add_argument("--version", action="version", version=f"gradtrace {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    c = sub.add_parser("check", help="check Python files statically (no torch import)",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("paths", nargs="*", default=None, metavar="PATH",
                   help="files or folders (default: .)")
    c.add_argument("--select", action="append", metavar="CODES",
                   help="comma-separated codes or prefixes to enable (GT1, GT105, ALL)")
    c.add_argument("--ignore", action="append", metavar="CODES", help="codes or prefixes to disable")
    c.add_argument("--extend-select", action="append", metavar="CODES",
                   help="codes or prefixes to enable on top of the selection")
    c.add_argument("--exclude", action="append", metavar="PATTERNS",
                   help="glob patterns replacing the default excludes")
    c.add_argument("--extend-exclude", action="append", metavar="PATTERNS",
                   help="glob patterns to exclude on top of the defaults")
    c.add_argument("--format", default="text", choices=("text", "json", "sarif", "github"),
                   help="output format (default: text)")
    c.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE")
    c.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    c.add_argument("--statistics", action="store_true", help="show counts per code")
    c.add_argument("--jobs", "-j", type=_jobs, default=0, metavar="N",
                   help="processes to use (default: the number of cores)")
    c.add_argument("--stdin-filename", metavar="NAME",
                   help="read the source from standard input and report it as NAME")
    c.add_argument("--fix", action="store_true", help="apply safe fixes")
    c.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    c.add_argument("--diff", action="store_true", help="show the fixes as a diff; write nothing")
    c.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the cache (also: GRADTRACE_NO_CACHE=1)")
    c.add_argument("--cache-dir", metavar="DIR",
                   help="where to keep the cache (default: $GRADTRACE_CACHE_DIR, else "
                        ".gradtrace_cache in the project root)")
    c.add_argument("--no-show-source", dest="show_source", action="store_false",
                   help="one line per finding, no source excerpt")
    c.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")
    r = sub.add_parser("rules", help="list the rules")
    r.add_argument("--markdown", action="store_true", help="write the rules reference (docs/rules.md)")
    e = sub.add_parser("explain", help="explain a rule code, or an error message from PyTorch")
    e.add_argument("what", nargs="+", metavar="CODE_OR_MESSAGE")
    sub.add_parser("run", help="run a script under gradient tracing (see `gradtrace run --help`)",
                   add_help=False)
    sub.add_parser("demo", help="check and run a small broken training script")
    sub.add_parser("server", help="run the language server over stdio (needs pygls: "
                                  "pip install 'gradtrace[server]')")
    return p


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: expected a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: must be 0 (all cores) or more")
    return n


def error(message: str) -> None:
    """Print ``gradtrace: error: message`` to stderr."""
    print(f"gradtrace: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gradtrace`` command; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "run":
        from gradtrace.runtime.runner import main as run_main

        return run_main(args[1:])
    parser = build_parser()
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if ns.command == "check":
            from gradtrace.lint.command import run_check

            return run_check(ns)
        if ns.command == "rules":
            return _rules(ns.markdown)
        if ns.command == "explain":
            return _explain(" ".join(ns.what))
        if ns.command == "server":
            from gradtrace.lsp import serve

            return serve()
        if ns.command == "demo":
            from gradtrace.demo import run_demo

            return run_demo()
        parser.print_help()
        return 0
    except GradtraceError as exc:
        error(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 1
    except Exception as exc:  # noqa: BLE001 - never a traceback from our own code
        if os.environ.get("GRADTRACE_STRICT"):
            raise
        error(f"internal error: {type(exc).__name__}: {exc} (please report this)")
        return 2


def _rules(markdown: bool) -> int:
    from gradtrace.docs import rules_markdown, rules_table

    sys.stdout.write(rules_markdown() if markdown else rules_table())
    return 0


def _explain(what: str) -> int:
    from gradtrace.codes import lookup
    from gradtrace.docs import explain_code

    entry = lookup(what) if len(what) < 60 else None
    if entry is not None:
        sys.stdout.write(explain_code(entry))
        return 0
    message = _explain_message(what)
    if message is not None:
        sys.stdout.write(message)
        return 0
    if len(what) < 12 and what.strip().upper().startswith("GT"):
        error(f"unknown rule {what!r}; `gradtrace rules` lists them")
    else:
        error(f"no rule and no known PyTorch error matches {what!r}; "
              "`gradtrace rules` lists the rules")
    return 2


def _explain_message(text: str) -> str | None:
    """A PyTorch error message, explained by the error catalogue (torch-free)."""
    from gradtrace.runtime.catalogue import explain_message

    findings = explain_message(text)
    if not findings:
        return None
    parts = []
    for f in findings:
        parts.append(f"{f.code} {f.name}\n\n{f.message}\n")
        if f.fix is not None:
            parts.append(f"Fix: {f.fix.title}\n")
    return "\n".join(parts)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
