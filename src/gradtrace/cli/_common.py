"""What the command modules share: the exit-code epilog, ``error()`` and option parsing."""
from __future__ import annotations

import sys

EPILOG = """exit codes:
  0  no findings
  1  findings reported
  2  usage or configuration error, a path that does not exist, or an internal error
`gradtrace run` exits with the script's own exit code (2 if gradtrace cannot start it)."""


def error(message: str) -> None:
    """Print ``gradtrace: error: message`` to stderr."""
    print(f"gradtrace: error: {message}", file=sys.stderr)


def split(values: list[str] | None) -> list[str] | None:
    """Comma-separated option values (repeatable options) as one list; None stays None."""
    if values is None:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]
