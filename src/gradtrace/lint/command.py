"""`gradtrace check`: settings, files, fixes, output and the exit code."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from gradtrace.findings import Finding
from gradtrace.lint import CheckResult, check_paths, check_text
from gradtrace.lint.config import Overrides, Settings, load_settings
from gradtrace.lint.fix import FixOutcome, fix_text, fixable
from gradtrace.formats import statistics, summary_line, to_github, to_json, to_sarif, to_text

MAX_FIX_ROUNDS = 10


def _settings(ns: argparse.Namespace, start: str) -> Settings:
    from gradtrace.cli import _split

    s = load_settings(start)
    return Overrides(select=_split(ns.select), ignore=_split(ns.ignore) or [],
                     extend_select=_split(ns.extend_select) or [],
                     exclude=_split(ns.exclude),
                     extend_exclude=_split(ns.extend_exclude) or []).apply(s)


def _check_one_text(text: str, path: str, settings: Settings) -> CheckResult:
    return check_text(text, path, settings)


def fix_loop(path: str, text: str, findings: list[Finding], settings: Settings,
             unsafe: bool) -> tuple[FixOutcome, list[Finding]]:
    """Fix, re-check and fix again until nothing changes; returns the outcome and what remains."""
    current, fixed, remaining = text, [], findings
    for _ in range(MAX_FIX_ROUNDS):
        outcome = fix_text(path, current, remaining, unsafe)
        if outcome.error is not None:
            return FixOutcome(path, text, current, tuple(fixed), outcome.error), remaining
        if not outcome.changed:
            break
        fixed.extend(outcome.fixed)
        current = outcome.new
        remaining = _check_one_text(current, path, settings).findings
    return FixOutcome(path, text, current, tuple(fixed)), remaining


def _apply_fixes(ns: argparse.Namespace, result: CheckResult, settings: Settings,
                 stdin_name: str | None) -> tuple[list[Finding], list[FixOutcome], list[str]]:
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


def run_check(ns: argparse.Namespace) -> int:
    """Run `gradtrace check` from parsed options; returns the exit code."""
    from gradtrace.cli import error

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
            result = _check_one_text(source, stdin_name, settings)
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
