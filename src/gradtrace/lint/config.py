"""Settings: defaults, ``[tool.gradtrace]`` in the nearest pyproject.toml, and CLI overrides."""
from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from gradtrace.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "build", "dist",
    "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    "site-packages", ".ipynb_checkpoints", "_build", "buck-out", ".direnv",
)
KEYS = ("select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude")


@dataclass(frozen=True)
class Settings:
    """Everything that decides which findings a run reports."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    root: str = "."
    source: str | None = None  # the pyproject.toml the settings came from

    def is_excluded(self, path: str) -> bool:
        """True when a path's name (or its path relative to the root) matches an exclude."""
        pattern = _glob_regex((*self.exclude, *self.extend_exclude))
        if pattern is None:
            return False
        name = os.path.basename(path.rstrip(os.sep)) or path
        return bool(pattern.match(name) or pattern.match(_relative(path, self.root)))

    def ignored_for(self, path: str) -> tuple[str, ...]:
        """Code prefixes ignored for this file by per-file-ignores."""
        if not self.per_file_ignores:
            return ()  # no pattern to match: the relative path is not needed
        rel = _relative(path, self.root)
        name = os.path.basename(path)
        out: list[str] = []
        for pat, codes in self.per_file_ignores:
            if fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(name, pat):
                out.extend(codes)
        return tuple(out)


@lru_cache(maxsize=16)
def _glob_regex(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One compiled regex for a tuple of glob patterns (trailing slashes ignored)."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p.rstrip('/'))})" for p in patterns))


def _relative(path: str, root: str) -> str:
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    except ValueError:
        rel = path
    return Path(rel).as_posix()


def find_pyproject(start: str) -> Path | None:
    """The nearest pyproject.toml with a [tool.gradtrace] table, from ``start`` upwards."""
    p = Path(os.path.abspath(start))
    if p.is_file():
        p = p.parent
    for d in (p, *p.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "[tool.gradtrace" in text:
                return candidate
    return None


def _codes(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: [tool.gradtrace] {key} must be a list of strings, "
                          f"got {value!r}")
    from gradtrace.lint.registry import check_prefixes

    return tuple(check_prefixes(value, f"{where}: [tool.gradtrace] {key}"))


def load_settings(start: str = ".") -> Settings:
    """Settings from the nearest pyproject.toml (or the defaults). Raises ConfigError."""
    path = find_pyproject(start)
    if path is None:
        return Settings()
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("gradtrace", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.gradtrace] must be a table")
    return apply_table(Settings(root=str(path.parent), source=where), table, where)


def apply_table(s: Settings, table: dict[str, Any], where: str) -> Settings:
    """Settings updated from a ``[tool.gradtrace]`` table; unknown keys are errors."""
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} in [tool.gradtrace] "
                              f"(known: {', '.join(KEYS)})")
        if key == "select":
            s = replace(s, select=_codes(value, key, where))
        elif key == "ignore":
            s = replace(s, ignore=_codes(value, key, where))
        elif key == "extend-select":
            s = replace(s, extend_select=_codes(value, key, where))
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: [tool.gradtrace] per-file-ignores must be a table "
                                  f"of glob = [codes], got {value!r}")
            s = replace(s, per_file_ignores=tuple(
                (pat, _codes(codes, f"per-file-ignores.{pat}", where))
                for pat, codes in value.items()))
        else:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: [tool.gradtrace] {key} must be a list of strings, "
                                  f"got {value!r}")
            s = replace(s, **{key.replace("-", "_"): tuple(value)})
    return s


@dataclass
class Overrides:
    """Command-line options that take precedence over the file."""

    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)

    def apply(self, s: Settings) -> Settings:
        from gradtrace.lint.registry import check_prefixes

        if self.select is not None:
            s = replace(s, select=tuple(check_prefixes(self.select, "--select")))
        if self.ignore:
            s = replace(s, ignore=s.ignore + tuple(check_prefixes(self.ignore, "--ignore")))
        if self.extend_select:
            s = replace(s, extend_select=s.extend_select + tuple(
                check_prefixes(self.extend_select, "--extend-select")))
        if self.exclude is not None:
            s = replace(s, exclude=tuple(self.exclude))
        if self.extend_exclude:
            s = replace(s, extend_exclude=s.extend_exclude + tuple(self.extend_exclude))
        return s
