"""The language server, `gradtrace server` (needs pygls: ``pip install 'gradtrace[server]'``).

Diagnostics for open documents (push or pull, NOTE [push or pull] in
:mod:`gradtrace.lsp.server`), the rule's fix and ``# noqa: GTnnn`` as quick fixes, and
``source.fixAll.gradtrace`` for the safe fixes. Importing this package imports nothing of pygls;
:func:`serve` does.
"""
from __future__ import annotations

from gradtrace.errors import UsageError


def serve() -> int:
    """Run the server over stdin/stdout until the client says exit; returns the exit code."""
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError:
        raise UsageError("`gradtrace server` needs pygls: "
                         "pip install 'gradtrace[server]'") from None
    from gradtrace.lsp.server import SERVER

    SERVER.start_io()
    return 0
