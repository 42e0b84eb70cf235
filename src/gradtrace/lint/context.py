"""What a rule may ask while it visits a node: names, positions, enclosing scopes, grad mode.

The engine keeps the stacks up to date as it walks; rules only read them. The data-flow view of
the enclosing function (which names hold a tensor on the graph, a number, a module, an
optimizer, ...) is computed lazily on first request and cached: see :mod:`gradtrace.lint.flow`.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable, TypeVar

from gradtrace.findings import Edit
from gradtrace.lint.code_text import LINE_END, code_text, identifiers, may_hold
from gradtrace.lint.grad_modes import (FUNCTION_TYPES, LOOP_TYPES,  # noqa: F401
                                        disabling_node, grad_mode_of)
from gradtrace.lint.names import Imports
from gradtrace.lint.nodes import begin_file, end_file

if TYPE_CHECKING:
    from gradtrace.lint.analysis import Analysis
    from gradtrace.lint.flow import Scope

T = TypeVar("T")
_MISSING = object()  # Context.memo: no entry yet (None is a value)



def source_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer counts them (only \\n, \\r\\n and \\r end a line)."""
    # str.split is ~4x faster than the regex split, which is needed only if a \r is around
    lines = LINE_END.split(text)[::2] if "\r" in text else text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class Context:
    """Per-file state shared by all rules. Read-only for rules."""

    def __init__(self, path: str, text: str, tree: ast.Module, imports: Imports,
                 code: str | None = None) -> None:
        self.path = path
        self.text = text
        self.tree = tree
        self.imports = imports
        self._lines: list[str] | None = None
        self._code = code
        self._code_lines: list[str] | None = None
        self._idents: str | None | bool = False  # False: not computed yet
        self._mentions: dict[str, bool] = {}
        self.stmts: list[ast.stmt] = []          # enclosing statements, innermost last
        self.exprs: list[ast.AST] = []           # enclosing expressions during an expr walk
        # one frame per function (module = first frame): [(with-or-def node, mode), ...]
        self.grad_frames: list[list[tuple[ast.AST, str]]] = [[]]
        self._scopes: dict[int, Scope] = {}
        self._raw_lines: list[bytes] | None = None
        self._memo: dict[tuple[str, int], object] = {}
        self._analysis: Analysis | None = None
        begin_file(tree, len(text))  # NOTE [walk index]

    @property
    def lines(self) -> list[str]:
        """The file's lines (as the tokenizer splits them), computed on first use."""
        if self._lines is None:
            self._lines = source_lines(self.text)
        return self._lines

    @property
    def code(self) -> str:
        """The text without comments and string contents, lines kept (NOTE [code text]).

        Every text search of a rule looks here, never in :attr:`text`: a word in a comment or
        a string must not decide a finding.
        """
        if self._code is None:
            self._code = code_text(self.text)
        return self._code

    @property
    def identifiers(self) -> str | None:
        """The distinct identifiers of :attr:`code`, for cheap absence tests
        (NOTE [identifier prefilter] in :mod:`gradtrace.lint.code_text`)."""
        if self._idents is False:
            self._idents = identifiers(self.code)
        return self._idents  # type: ignore[return-value]

    def know_identifiers(self, idents: str) -> None:
        """Take :attr:`identifiers` from the engine's word search, which builds them anyway
        (NOTE [token lines] in :mod:`gradtrace.lint.words`; their order does not matter)."""
        if self._idents is False:
            self._idents = idents

    def mentions(self, *words: str) -> bool:
        """Whether the code (NOTE [code text]) holds any of ``words``, cached per word.

        Rules ask it on every call or function they visit: a search of the whole text each
        time made the cost grow with the square of the file's length. The identifiers'
        prefilter is used only once something else has built them: a file asks about eleven
        distinct words (transformers), whose scans of the code cost half as much as building
        the identifiers (the prefilter never changes the answer:
        NOTE [identifier prefilter])."""
        cache = self._mentions
        for w in words:
            hit = cache.get(w)
            if hit is None:
                idents = self._idents
                hit = cache[w] = (idents is False or may_hold(idents, w)) and w in self.code
            if hit:
                return True
        return False

    @property
    def code_lines(self) -> list[str]:
        """The lines of :attr:`code` (the same line numbers as :attr:`lines`)."""
        if self._code_lines is None:
            self._code_lines = source_lines(self.code)
        return self._code_lines

    # -- names -------------------------------------------------------------------------------
    def qualified_name(self, node: ast.AST) -> str | None:
        """What a Name/Attribute chain means after imports (``torch.no_grad``)."""
        return self.imports.qualified_name(node)

    def call_name(self, node: ast.AST) -> str | None:
        """The qualified name of the called function when ``node`` is a call."""
        return self.imports.qualified_name(node.func) if isinstance(node, ast.Call) else None

    # -- positions ---------------------------------------------------------------------------
    def _char_col(self, lineno: int, byte_col: int) -> int:
        if 0 < lineno <= len(self.lines):
            line = self.lines[lineno - 1]
            if not line.isascii():
                return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return byte_col

    def column(self, node: ast.AST) -> int:
        """0-based character column of ``node`` (ast gives UTF-8 byte offsets)."""
        return self._char_col(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end_column(self, node: ast.AST) -> int | None:
        end = getattr(node, "end_col_offset", None)
        return None if end is None else self._char_col(node.end_lineno, end)  # type: ignore[attr-defined]

    def source(self, node: ast.AST) -> str:
        """The exact source text of ``node``."""
        lineno, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if lineno is None or end is None:
            return ""
        lines = self._raw_lines
        if lines is None:
            # bytes.splitlines ends lines exactly where the tokenizer does (\n, \r\n, \r)
            lines = self._raw_lines = self.text.encode("utf-8").splitlines(keepends=True)
            if not self.text or self.text.endswith(("\n", "\r")):
                lines.append(b"")  # the empty line after the last line end
        if end > len(lines):
            return ""
        col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        if lineno == end:
            return lines[lineno - 1][col:end_col].decode("utf-8", "replace")
        parts = [lines[lineno - 1][col:], *lines[lineno:end - 1], lines[end - 1][:end_col]]
        return b"".join(parts).decode("utf-8", "replace")

    def code_of(self, node: ast.AST) -> str:
        """The source of ``node`` without its comments and string contents (NOTE [code text]).

        For text searches in one node; :meth:`source` is for quoting it in a message or a fix.
        """
        return code_text(self.source(node))

    def code_line(self, lineno: int) -> str:
        """Line ``lineno`` of :attr:`code` (for searches; :meth:`line_text` is for display)."""
        lines = self.code_lines
        return lines[lineno - 1] if 0 < lineno <= len(lines) else ""

    def edit(self, node: ast.AST, content: str) -> Edit:
        """An edit replacing ``node``'s source with ``content``."""
        return Edit(node.lineno, self.column(node), node.end_lineno,  # type: ignore[attr-defined]
                    self.end_column(node) or 0, content)

    def line_text(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    # -- enclosing structure -----------------------------------------------------------------
    @property
    def statement(self) -> ast.stmt | None:
        """The statement being visited (innermost)."""
        return self.stmts[-1] if self.stmts else None

    @property
    def parent(self) -> ast.AST | None:
        """The direct parent of the expression being visited (an expression or the statement)."""
        if len(self.exprs) >= 2:
            return self.exprs[-2]
        return self.statement

    @property
    def function(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The innermost enclosing function definition, if any."""
        for s in reversed(self.stmts):
            if isinstance(s, FUNCTION_TYPES) and s is not self.statement:
                return s
        return None

    @property
    def class_def(self) -> ast.ClassDef | None:
        for s in reversed(self.stmts[:-1]):
            if isinstance(s, ast.ClassDef):
                return s
        return None

    @property
    def loops(self) -> list[ast.stmt]:
        """Enclosing loops inside the current function, outermost first."""
        out: list[ast.stmt] = []
        for s in reversed(self.stmts[:-1]):
            if isinstance(s, FUNCTION_TYPES) or isinstance(s, ast.ClassDef):
                break
            if isinstance(s, LOOP_TYPES):
                out.append(s)
        return out[::-1]

    @property
    def grad_disabled(self) -> ast.AST | None:
        """The ``with``/decorator node that disables grad here, or None when grad is on.

        Innermost wins, except that ``enable_grad`` does not re-enable inside
        ``inference_mode`` (pytorch-facts.md#grad-mode-nesting).
        """
        return disabling_node(self.grad_frames[-1])

    def scope(self, node: ast.AST | None = None) -> Scope:
        """Data-flow facts of ``node`` (default: the enclosing function, else the module).

        Computed once per function and cached.
        """
        node = node or self.function or self.tree
        s = self._scopes.get(id(node))
        if s is None:  # the import only here: asked thousands of times per file
            from gradtrace.lint.analysis.owners import home
            other = home(self, node)
            if other is not self:  # a function of another file (NOTE [project index])
                return other.scope(node)
            from gradtrace.lint.flow import Scope
            s = self._scopes[id(node)] = Scope(node, self)
        return s

    def release(self) -> None:
        """Drop the per-file caches (they refer back to this context: see NOTE [gc])."""
        self._scopes.clear()
        self._memo.clear()
        end_file(self.tree)
        if self._analysis is not None:
            self._analysis.release()
            self._analysis = None

    @property
    def analysis(self) -> Analysis:
        """The file's shared facts (:mod:`gradtrace.lint.analysis`), built on first use."""
        if self._analysis is None:
            from gradtrace.lint.analysis import Analysis
            self._analysis = Analysis(self)
        return self._analysis

    def memo(self, key: str, node: ast.AST, make: Callable[[], T]) -> T:
        """``make()`` computed once per (``key``, ``node``) in this file and cached.

        For per-function facts that several rules of one family share (not kept across files).
        """
        k = (key, id(node))
        got = self._memo.get(k, _MISSING)  # one look-up: asked tens of thousands of times
        if got is _MISSING:
            got = self._memo[k] = make()
        return got  # type: ignore[return-value]


from gradtrace.lint.analysis.project_files import CONTEXT_CLASS  # noqa: E402 - after Context

CONTEXT_CLASS.append(Context)
