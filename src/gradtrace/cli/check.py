"""`gradtrace check`: options, settings, files, fixes, output and the exit code (no torch)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from gradtrace.cli._common import EPILOG, error, split
from gradtrace.findings import Finding

if TYPE_CHECKING:
    from gradtrace.lint import CheckResult
    from gradtrace.lint.config import Settings
    from gradtrace.lint.fix import FixOutcome


def add_parser(sub: Any) -> None:
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


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: expected a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: must be 0 (all cores) or more")
    return n


def _settings(ns: argparse.Namespace, start: str) -> Settings:
    from gradtrace.lint.config import Overrides, load_settings

    s = load_settings(start)
    return Overrides(select=split(ns.select), ignore=split(ns.ignore) or [],
                     extend_select=split(ns.extend_select) or [],
                     exclude=split(ns.exclude),
                     extend_exclude=split(ns.extend_exclude) or []).apply(s)


def _apply_fixes(ns: argparse.Namespace, result: CheckResult, settings: Settings,
                 stdin_name: str | None) -> tuple[list[Finding], list[FixOutcome], list[str]]:
    from gradtrace.lint.fix import fix_loop, fixable

    by_path: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_path.setdefault(f.path, []).append(f)
    remaining: list[Finding] = []
    outcomes: list[FixOutcome] = []
    problems: list[str] = []
    for path, found in by_path.items():
        text = result.sources.get(path)
        if text is None or not any(fixable(f, ns.unsafe_fixes) for f in found):
            remaining.extend(found)
            continue
        outcome, left = fix_loop(path, text, found, settings, ns.unsafe_fixes)
        if outcome.error:
            problems.append(f"{path}: {outcome.error}")
        outcomes.append(outcome)
        remaining.extend(left)
        if outcome.changed and not ns.diff and path != stdin_name:
            try:
                with open(path, "w", encoding="utf-8", newline="") as fh:
                    fh.write(outcome.new)
            except OSError as exc:
                problems.append(f"{path}: cannot write fixes: {exc.strerror}")
    return sorted(remaining, key=Finding.sort_key), outcomes, problems


def _render(ns: argparse.Namespace, findings: list[Finding], result: CheckResult,
            out: TextIO, fixed: int) -> None:
    from gradtrace.formats import statistics, summary_line, to_github, to_json, to_sarif, to_text
    from gradtrace.lint.fix import fixable

    if ns.format == "json":
        out.write(to_json(findings))
    elif ns.format == "sarif":
        out.write(to_sarif(findings))
    elif ns.format == "github":
        out.write(to_github(findings))
    else:
        color = out is sys.stdout and _use_color()
        if not (ns.quiet and ns.statistics):  # -q --statistics: the counts only
            out.write(to_text(findings, result.sources, color=color, show_source=ns.show_source))
        if ns.statistics:
            out.write(statistics(findings))
        if not ns.quiet and (findings or not result.path_errors):  # a missing path never passes
            n_fixable = sum(fixable(f, ns.unsafe_fixes) for f in findings)
            if fixed:
                out.write(f"Fixed {fixed} error{'s' if fixed != 1 else ''}.\n")
            if findings or not fixed:
                out.write(summary_line(findings, 0 if ns.fix else n_fixable) + "\n")
    if ns.statistics and ns.format != "text":
        sys.stderr.write(statistics(findings))


def _use_color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


def run(ns: argparse.Namespace) -> int:
    """Run `gradtrace check` from parsed options; returns the exit code."""
    from gradtrace.lint import CheckResult, check_paths, check_text

    stdin_name = ns.stdin_filename
    paths = ns.paths or ["."]
    if "-" in paths:  # `gradtrace check -` reads the source from standard input
        if len(paths) > 1:
            error("`-` (standard input) cannot be combined with other paths")
            return 2
        stdin_name = stdin_name or "-"
    settings = _settings(ns, os.path.dirname(stdin_name) or "." if stdin_name else paths[0])
    if stdin_name is not None:
        text = sys.stdin.buffer.read()
        from gradtrace.lint import decode

        source, problem = decode(text, stdin_name)
        result = CheckResult(files=1, findings=[problem] if problem else [])
        if source is not None:
            result = check_text(source, stdin_name, settings)
    else:
        from gradtrace.lint.cache import open_cache

        jobs = ns.jobs or os.cpu_count() or 1
        cache = open_cache(settings, ns.cache_dir, ns.no_cache)
        result = check_paths(paths, settings, jobs=jobs, cache=cache)
        problem = cache.save(result.cache_entries) if cache is not None else None
        if problem:
            print(f"gradtrace: warning: {problem}", file=sys.stderr)
    findings = result.findings
    outcomes: list[FixOutcome] = []
    if ns.fix or ns.diff:
        findings, outcomes, problems = _apply_fixes(ns, result, settings, stdin_name)
        result.rule_errors.extend(problems)
    if ns.diff:
        sys.stdout.write("".join(o.diff() for o in outcomes if o.changed))
    elif stdin_name is not None and ns.fix:
        changed = [o for o in outcomes if o.changed]
        sys.stdout.write(changed[0].new if changed else result.sources.get(stdin_name, ""))
    # With --fix on stdin, stdout carries the fixed source; what remains goes to stderr (ruff).
    out: TextIO = sys.stderr if stdin_name is not None and ns.fix and not ns.diff else sys.stdout
    if ns.output:
        try:
            out = open(ns.output, "w", encoding="utf-8")
        except OSError as exc:
            error(f"--output {ns.output!r}: cannot write: {exc.strerror}")
            return 2
    try:
        if not ns.diff:
            _render(ns, findings, result, out,
                    sum(len(o.fixed) for o in outcomes if o.changed))
    finally:
        if out is not sys.stdout:
            out.close()
    for msg in result.path_errors:
        error(msg)
    for msg in result.rule_errors:
        error(msg)
    if result.path_errors or result.rule_errors:
        return 2
    if ns.diff:
        return 1 if any(o.changed for o in outcomes) else 0
    return 0 if ns.exit_zero or not findings else 1
