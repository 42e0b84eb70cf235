"""Command line: ``gradtrace check | rules | explain | run | demo | server``; no torch import.

One module per command (``add_parser(sub)`` and ``run(ns)``); the commands share
:mod:`gradtrace.cli._common` and never import this module.

Exit codes (all subcommands except ``run``, which returns the script's own exit code):
  0  no findings
  1  findings (or, with --fix/--diff, changes that remain or would be made)
  2  usage, configuration or internal error (bad option, missing path, a rule crashed)
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from gradtrace._version import __version__
from gradtrace.cli import check, demo, explain, rules, run, server
from gradtrace.cli._common import EPILOG, error
from gradtrace.env import strict
from gradtrace.errors import GradtraceError

COMMANDS = {"check": check, "rules": rules, "explain": explain, "run": run, "demo": demo,
            "server": server}


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree (``run`` is parsed by the runtime itself)."""
    p = argparse.ArgumentParser(
        prog="gradtrace", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Find where gradients stop flowing in PyTorch code, and say why.")
    p.add_argument("--version", action="version", version=f"gradtrace {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gradtrace`` command; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "run":
        return run.main(args[1:])
    parser = build_parser()
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if ns.command in COMMANDS:
            return COMMANDS[ns.command].run(ns)
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
        if strict():
            raise
        error(f"internal error: {type(exc).__name__}: {exc} (please report this)")
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
