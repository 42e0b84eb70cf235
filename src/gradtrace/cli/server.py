"""`gradtrace server`: the language server over stdio (pygls, imported only here)."""
from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("server", help="run the language server over stdio (needs pygls: "
                                  "pip install 'gradtrace[server]')")


def run(ns: argparse.Namespace) -> int:
    from gradtrace.lsp import serve

    return serve()
