"""One exception hierarchy for everything gradtrace raises on purpose."""
from __future__ import annotations


class GradtraceError(Exception):
    """Base class of gradtrace's own errors."""


class ConfigError(GradtraceError):
    """A bad option or configuration value; the message names the key and where it came from."""


class UsageError(GradtraceError):
    """A bad command line (exit code 2)."""


class RuleError(GradtraceError):
    """A rule crashed on a file. The run goes on; the CLI reports it and exits 2 at the end."""

    def __init__(self, code: str, path: str, cause: BaseException) -> None:
        super().__init__(f"rule {code} crashed on {path}: {type(cause).__name__}: {cause}")
        self.code = code
        self.path = path
        self.cause = cause
