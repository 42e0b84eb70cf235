"""flake8 plugin (entry point ``flake8.extension``, code prefix ``GT``).

flake8 hands us the parsed tree; we report the same findings as ``gradtrace check`` with
flake8's 0-based columns. flake8 runs every installed plugin and filters codes afterwards, so
``parse_options`` notes whether the selection can include a GT code at all
(``flake8 --select=F`` then costs us nothing), and files whose code never mentions ``torch``
(comments and strings aside) are skipped.
"""
from __future__ import annotations

import ast
from typing import Any, Iterator

from gradtrace._version import __version__


class Plugin:
    """The flake8 adapter: ``Plugin(tree, lines).run()`` yields (line, col0, message, type)."""

    name = "gradtrace"
    version = __version__
    enabled = True

    @classmethod
    def parse_options(cls, options: Any) -> None:
        """Called once by flake8 with its options: is any GT code selectable?"""
        def hits(codes: Any) -> bool:
            return any(c.startswith("GT") or "GT".startswith(c) for c in (codes or ()) if c)

        select = getattr(options, "select", None)
        cls.enabled = select is None or hits(select) or hits(getattr(options, "extend_select", None))

    def __init__(self, tree: ast.AST, lines: list[str], filename: str = "") -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type[Any]]]:
        if not self.enabled:
            return
        text = "".join(self.lines)
        if "torch" not in text or not isinstance(self.tree, ast.Module):
            return
        from gradtrace.lint.code_text import code_text
        from gradtrace.lint.engine import FileChecker, internal_error
        from gradtrace.lint.registry import select_rules

        code = code_text(text)
        if "torch" not in code:  # only in comments or strings (NOTE [code text])
            return
        path = self.filename or "<stdin>"
        try:  # a crash is a GT002 finding, never a traceback (NOTE [internal errors])
            checker = FileChecker(path, text, self.tree, [r() for r in select_rules()], code)
        except Exception as exc:  # noqa: BLE001
            found = [internal_error("engine", path, exc)]
        else:
            try:
                found = checker.run()
            except Exception as exc:  # noqa: BLE001
                checker.crashed("engine", exc)
                found = checker.findings
            finally:
                checker.ctx.release()
        for f in sorted(found, key=lambda f: (f.line, f.column, f.code)):
            yield f.line, f.column, f"{f.code} {f.message}", type(self)
