"""The Rule base class and the Bad/Good example records that are also its tests and docs.

A rule is one class: identity (``code``, ``name``), text (``message``, docstring with
**Why** / **Known limits**), ``triggers`` (words that must appear in a file, and on the lines
of a statement, for the rule's expression visitors to run), examples, and ``visit_<Node>``
methods that *yield* findings. Rules are discovered (see :mod:`gradtrace.lint.registry`).

# NOTE [triggers]
The engine walks statements only; a rule's expression visitors (``visit_Call``,
``visit_Attribute``, ...) run only on statements whose own lines contain one of the rule's
trigger words in their code (comments and strings do not count: NOTE [code text]) (or a local alias of an imported name that contains one). Statement visitors
(``visit_With``, ``visit_FunctionDef``, ``visit_Assign``, ...) run on every statement of a file
in which a trigger word appears, or, for a rule with ``gate_statements = True``, only on the
statements whose lines (bodies and decorators included) contain one; ``visit_Module`` runs once
in every file where one appears. This keeps the checker close to the cost of ``ast.parse``.

``statement_triggers``, when set, replaces the trigger words for that statement gate only
(GT510 is active where ``reduction`` appears, but its ``visit_FunctionDef`` only matters on a
function that calls ``.backward(``). ``gate_statements = "function"`` is a promise by a rule
that keeps state or looks beyond one statement: its statement visitors find nothing on a
statement whose innermost enclosing function has no line (decorators included) holding one of
those words, so the engine may skip such statements (NOTE [quiet subtrees] in
:mod:`gradtrace.lint.engine`); outside functions they see every statement.
"""
from __future__ import annotations

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Literal

from gradtrace.findings import Edit, Finding, Fix, Related, Severity

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

CODE_RE = re.compile(r"^GT\d{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Bad:
    """Source that must produce the rule's code (``at=(line, col)``: 1-based line, 0-based col).

    ``fixed`` is the source after applying the rule's fix (required iff the rule has a fix).
    ``count`` is how many findings of this rule the example gives.
    """

    src: str
    fixed: str | None = None
    at: tuple[int, int] | None = None
    count: int = 1

    @property
    def code(self) -> str:
        return textwrap.dedent(self.src).strip("\n") + "\n"


@dataclass(frozen=True)
class Good:
    """Source on which the rule must stay silent (usually the look-alike of the bug)."""

    src: str

    @property
    def code(self) -> str:
        return textwrap.dedent(self.src).strip("\n") + "\n"


class Rule:
    """Base class of every static rule; subclass it inside ``gradtrace.lint.rules``."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[Severity] = "error"
    message: ClassVar[str] = ""
    fix_title: ClassVar[str | None] = None
    fix_safety: ClassVar[str | None] = None  # "safe" | "unsafe" | None (no fix)
    triggers: ClassVar[tuple[str, ...]] = ()
    default: ClassVar[bool] = True  # 9xx rules are off by default
    # True: statement visitors run only on statements whose lines hold a trigger word
    # (NOTE [triggers]); rules that keep no state across statements should set it.
    # "function": they may be skipped in functions whose lines hold none.
    gate_statements: ClassVar[bool | Literal["function"]] = False
    # words gating the statement visitors instead of ``triggers`` (empty: the triggers)
    statement_triggers: ClassVar[tuple[str, ...]] = ()
    # words one of which a function must hold for the rule to find something in it (nothing
    # outside functions): NOTE [function requires] in gradtrace.lint.function_gate
    function_requires: ClassVar[tuple[str, ...]] = ()
    # True: reports only in a file whose code may hold a training step (NOTE [step files])
    needs_step: ClassVar[bool] = False
    examples: ClassVar[list[Bad | Good]] = []

    @classmethod
    def has_fix(cls) -> bool:
        return cls.fix_safety is not None

    @classmethod
    def summary(cls) -> str:
        """The docstring's first paragraph, on one line."""
        first = inspect.cleandoc(cls.__doc__ or "").partition("\n\n")[0]
        return " ".join(first.split()) or cls.message

    @classmethod
    def rationale(cls) -> str:
        """The docstring after its first paragraph (Why / Known limits)."""
        return inspect.cleandoc(cls.__doc__ or "").partition("\n\n")[2].strip()

    def report(
        self,
        node: ast.AST,
        ctx: Context,
        related: Iterable[Related] = (),
        fix: Fix | None = None,
        **fields: Any,
    ) -> Finding:
        """Build a finding at ``node`` with ``message.format(**fields)``."""
        return Finding(
            code=self.code,
            name=self.name,
            message=self.message.format(**fields),
            path=ctx.path,
            line=node.lineno,  # type: ignore[attr-defined]
            column=ctx.column(node),
            end_line=getattr(node, "end_lineno", None),
            end_column=ctx.end_column(node),
            severity=self.severity,
            related=tuple(related),
            fix=fix,
        )

    def fix(self, *edits: Edit, title: str | None = None) -> Fix:
        """A Fix with this rule's title and safety."""
        return Fix(title or self.fix_title or "", self.fix_safety or "safe", edits)  # type: ignore[arg-type]

