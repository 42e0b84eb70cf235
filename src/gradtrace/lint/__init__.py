"""The static checker: ``check_source`` for one text, ``check_paths`` for files and folders.

Example::

    >>> from gradtrace.lint import check_source
    >>> [f.code for f in check_source("import torch\\nx = torch.ones(1)\\nx.item().backward()\\n")]
    ['GT101']
"""
from __future__ import annotations

import ast
import gc
import io
import os
import tokenize
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from gradtrace.findings import Finding
from gradtrace.lint.code_text import code_text
from gradtrace.lint.prefilter import imported_by_torch_sibling, imports_torch_sibling, worth_checking
from gradtrace.lint.config import Settings
from gradtrace.errors import RuleError
from gradtrace.lint.engine import FileChecker, internal_error, noqa_filter
from gradtrace.env import strict
from gradtrace.lint.registry import ENGINE_CODES, code_enabled, select_rules
from gradtrace.lint.rule import Rule

if TYPE_CHECKING:
    from gradtrace.lint.cache import FileCache

__all__ = ["CheckResult", "check_paths", "check_source", "check_text", "iter_files"]
GC_EVERY = 100  # files between two cyclic garbage collections (NOTE [gc])


@dataclass
class CheckResult:
    """What a run found: findings, rule crashes and path errors (both mean exit 2)."""

    findings: list[Finding] = field(default_factory=list)
    rule_errors: list[str] = field(default_factory=list)
    path_errors: list[str] = field(default_factory=list)
    files: int = 0
    sources: dict[str, str] = field(default_factory=dict)  # path -> text, for fixes and carets
    cache_entries: dict = field(default_factory=dict)  # new entries for lint.cache (path -> entry)

    def extend(self, other: CheckResult) -> None:
        self.findings.extend(other.findings)
        self.rule_errors.extend(other.rule_errors)
        self.path_errors.extend(other.path_errors)
        self.files += other.files
        self.sources.update(other.sources)
        self.cache_entries.update(other.cache_entries)


def _engine_finding(code: str, path: str, message: str, line: int = 1, col: int = 0) -> Finding:
    return Finding(code=code, name=ENGINE_CODES[code].name, message=message, path=path,
                   line=max(line, 1), column=max(col, 0))


def decode(data: bytes, path: str) -> tuple[str | None, Finding | None]:
    """Decode source bytes as Python does (BOM, coding cookie); a GT000 finding on failure."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return None, _engine_finding("GT000", path, f"cannot decode file: {exc}")
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        line = data[: getattr(exc, "start", 0)].count(b"\n") + 1
        return None, _engine_finding(
            "GT000", path, f"file is not valid {encoding} ({exc}); it was not checked", line)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, None


def parse(text: str, path: str) -> tuple[ast.Module | None, Finding | None]:
    """``ast.parse``, turning every failure into one GT000 finding."""
    try:
        return ast.parse(text, filename=path), None
    except SyntaxError as exc:
        msg = f"syntax error: {exc.msg}; the file was not checked"
        return None, _engine_finding("GT000", path, msg, exc.lineno or 1, (exc.offset or 1) - 1)
    except (ValueError, RecursionError, MemoryError) as exc:
        return None, _engine_finding("GT000", path, f"cannot parse: {exc}; the file was not checked")


def _check_text(text: str, path: str, rules: Sequence[type[Rule]], settings: Settings,
                result: CheckResult, code: str | None = None) -> None:
    ignored = settings.ignored_for(path)
    tree, problem = parse(text, path)
    if problem is not None:
        if code_enabled("GT000", settings.select, settings.ignore + ignored,
                        settings.extend_select):
            result.findings.append(problem)
        return
    active = [r for r in rules if not any(r.code.startswith(i) for i in ignored)] \
        if ignored else rules
    try:  # the classes: the engine makes the rules active in the file
        checker = FileChecker(path, text, tree, active, code)
    except Exception as exc:  # noqa: BLE001 - NOTE [internal errors]
        if strict():
            raise
        result.rule_errors.append(str(RuleError("engine", path, exc)))
        result.findings.append(internal_error("engine", path, exc))
        return
    try:
        found = checker.run()
    except Exception as exc:  # noqa: BLE001 - NOTE [internal errors]
        if strict():
            raise
        checker.crashed("engine", exc)
        found = checker.findings
    finally:
        checker.ctx.release()
    result.rule_errors.extend(str(e) for e in checker.errors)
    if checker.errors and not code_enabled("GT002", settings.select, settings.ignore + ignored,
                                           settings.extend_select):
        found = [f for f in found if f.code != "GT002"]
    if found:
        result.findings.extend(noqa_filter(sorted(found, key=Finding.sort_key),
                                           checker.ctx.lines))
        result.sources[path] = text


def check_source(source: str, path: str = "<string>", select: Sequence[str] | None = None,
                 ignore: Sequence[str] = (), settings: Settings | None = None) -> list[Finding]:
    """Findings for one source text (no torch prefilter: the text is always checked)."""
    settings = settings or Settings(select=tuple(select) if select is not None else None,
                                    ignore=tuple(ignore))
    rules = select_rules(settings.select, settings.ignore, settings.extend_select)
    result = CheckResult()
    _check_text(source, path, rules, settings, result)
    return result.findings


def check_text(text: str, path: str, settings: Settings) -> CheckResult:
    """Findings and rule crashes for one source text (no prefilter), as the editor needs them."""
    result = CheckResult(files=1)
    rules = select_rules(settings.select, settings.ignore, settings.extend_select)
    _check_text(text, path, rules, settings, result)
    result.sources[path] = text
    return result


def check_file(path: str, rules: Sequence[type[Rule]], settings: Settings,
               cache: FileCache | None = None) -> CheckResult:
    """Read, prefilter, decode, parse and check one file.

    A file whose code (comments and strings aside: NOTE [code text]) never mentions ``torch``
    is skipped, unless it trains through helpers of files beside it (NOTE [torch prefilter]).

    With a ``cache`` (:mod:`gradtrace.lint.cache`), a file whose bytes were checked before under
    the same settings is not parsed again.
    """
    result = CheckResult(files=1)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        if code_enabled("GT001", settings.select, settings.ignore, settings.extend_select):
            reason = exc.strerror or type(exc).__name__
            result.findings.append(_engine_finding("GT001", path, f"cannot read file: {reason}"))
        return result
    if not worth_checking(path, data):  # NOTE [torch prefilter]
        return result
    if cache is not None:
        return cache.check(path, data, lambda: check_bytes(path, data, rules, settings))
    return check_bytes(path, data, rules, settings)


def check_bytes(path: str, data: bytes, rules: Sequence[type[Rule]],
                settings: Settings) -> CheckResult:
    """Decode, parse and check the bytes of one file."""
    result = CheckResult(files=1)
    text, problem = decode(data, path)
    if problem is not None:
        if code_enabled("GT000", settings.select, settings.ignore, settings.extend_select):
            result.findings.append(problem)
        return result
    code = code_text(text)  # type: ignore[arg-type]
    raw = code.encode("utf-8", "replace") if "torch" not in code else b""
    if "torch" not in code and not imports_torch_sibling(path, raw) \
            and not imported_by_torch_sibling(path, raw):
        return result
    _check_text(text, path, rules, settings, result, code)  # type: ignore[arg-type]
    return result


def iter_files(paths: Iterable[str], settings: Settings,
               errors: list[str]) -> Iterator[str]:
    """Python files under ``paths``; excluded folders are skipped, missing paths reported."""
    seen: set[str] = set()
    folders: dict[str, str] = {}  # folder -> its real path, for the files' keys
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not settings.is_excluded(os.path.join(root, d)))
                for f in sorted(files):
                    full = os.path.normpath(os.path.join(root, f))
                    if f.endswith((".py", ".pyi")) and not settings.is_excluded(full):
                        key = _real_file(full, folders)
                        if key not in seen:
                            seen.add(key)
                            yield full
        elif os.path.isfile(p) or os.path.islink(p):
            key = _real_file(p, folders)
            if key not in seen:
                seen.add(key)
                yield p
        else:
            errors.append(f"{p}: no such file or directory")


def _real_file(path: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(path)`` for a file: its folder's real path (looked up once in
    ``folders``) and its name, unless the file itself is a link (realpath resolves the folders
    first, then the last name only when it is a link)."""
    if os.path.islink(path):
        return os.path.realpath(path)
    head, name = os.path.split(path)
    real = folders.get(head)
    if real is None:
        real = folders[head] = os.path.realpath(head)
    return os.path.join(real, name)


def _worker(args: tuple[list[str], Settings, FileCache | None, list[str]]) -> CheckResult:
    paths, settings, cache, roots = args
    from gradtrace.lint.analysis.project_files import set_roots
    set_roots(roots)  # NOTE [project index]: the folders given to `check`
    rules = select_rules(settings.select, settings.ignore, settings.extend_select)
    out = CheckResult()
    # NOTE [gc]: syntax trees hold no reference cycles and are freed by reference counting,
    # but their millions of allocations make the cyclic collector run over and over (about a
    # third of the time of a run). Collect the young generations once every GC_EVERY files
    # instead, for the odd cycle an analysis may make (12 objects on the whole benchmark
    # corpus). Nothing of a file may outlive it: per-file caches live in Context.memo, never in
    # module-level caches keyed by nodes, which would keep whole trees alive. A nested function
    # that calls itself is a cycle (the function, the cell holding it): one that captures the
    # context, a scope or a node leaves the file's whole tree and facts to the collector
    # (session 55's two such closures made each file's release a collection: 1.3 M objects
    # per 600 files, +10% of a run). Recursive walks are module-level functions, loops, or
    # methods of a small object (tests/test_layout.py checks it).
    enabled = gc.isenabled()
    gc.disable()
    try:
        for n, p in enumerate(paths, 1):
            out.extend(check_file(p, rules, settings, cache))
            if n % GC_EVERY == 0:
                gc.collect(1)
    finally:
        if enabled:
            gc.enable()
    return out


def check_paths(paths: Sequence[str], settings: Settings | None = None,
                jobs: int = 1, cache: FileCache | None = None) -> CheckResult:
    """Check files and folders; ``jobs`` > 1 spreads files over processes.

    ``cache`` (a :class:`gradtrace.lint.cache.FileCache`) answers for files checked before;
    its new entries are left in ``result.cache_entries`` for ``cache.save``.
    """
    settings = settings or Settings()
    result = CheckResult()
    roots = [p for p in paths if os.path.exists(p)]
    files = list(iter_files(paths, settings, result.path_errors))
    if cache is not None and jobs > 1 and len(files) >= 8:
        files = cache.answer(files, result)  # hits answered here; the rest go to the workers
    if jobs <= 1 or len(files) < 8:
        result.extend(_worker((files, settings, cache, roots)))
    else:
        from concurrent.futures import ProcessPoolExecutor

        chunks = [files[i::jobs * 4] for i in range(jobs * 4)]
        shared = cache.for_workers() if cache is not None else None
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for part in pool.map(_worker, [(c, settings, shared, roots)
                                           for c in chunks if c]):
                result.extend(part)
    result.findings.sort(key=Finding.sort_key)
    return result
