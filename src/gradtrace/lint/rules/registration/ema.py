"""GT457, GT458: a weight copy between two models (an EMA / mean teacher) that copies nothing.

Both read loops over the tensors of modules: ``zip(ema.parameters(), model.parameters())``,
``list(model.state_dict().values())`` kept on ``self``, ``model.named_parameters()``.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._owners import owners

# the methods of nn.Module that yield its tensors (`named_*` as (name, tensor) pairs)
TENSOR_LISTS = frozenset({"parameters", "buffers", "named_parameters", "named_buffers"})
WRAPS = frozenset({"list", "tuple"})
# in-place writes whose value comes from an argument (a copy or a blend), and `.data =`
WRITES_FROM = frozenset({"copy_", "lerp_", "add_", "sub_", "addcmul_", "set_"})
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Tensors:
    """Which module's tensors an expression lists (``model.parameters()``,
    ``list(m.state_dict().values())``, a name or ``self`` attribute bound to one)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.owner = owners(ctx)

    def of(self, e: ast.AST, where: ast.AST, line: int, depth: int = 0) -> str | None:
        """The dotted owner (``""`` when it is not a plain name), or None: not module tensors."""
        if depth > 4:
            return None
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Name) and f.id in WRAPS and len(e.args) == 1:
                return self.of(e.args[0], where, line, depth + 1)
            if isinstance(f, ast.Attribute) and not e.args:
                if f.attr in TENSOR_LISTS:
                    return dotted(f.value) or ""
                if f.attr == "values" and isinstance(f.value, ast.Call) and isinstance(
                        f.value.func, ast.Attribute) and f.value.func.attr == "state_dict":
                    return dotted(f.value.func.value) or ""
            return None
        name = dotted(e)
        if name is None:
            return None
        if name.startswith("self.") and name.count(".") == 1:
            cls = self.ctx.analysis.class_of(where if isinstance(where, FUNCS) else None)
            info = cls.attrs.get(name[5:]) if cls is not None else None
            if info is None or info.later or info.value is None:
                return None
            return self.of(info.value, info.method, info.stmt.lineno, depth + 1)
        b = self.ctx.scope(where).binding_before(name, line)
        if b is None or b.value is None or not isinstance(b.stmt, ast.Assign):
            return None
        return self.of(b.value, where, b.line, depth + 1)

    def loop(self, node: ast.For) -> list[tuple[str, str]] | None:
        """``(loop variable, owner)`` for each module-tensor stream the loop walks, or None."""
        where = self.owner.get(id(node), self.ctx.tree)
        it, target = node.iter, node.target
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip" \
                and isinstance(target, ast.Tuple) and len(target.elts) == len(it.args) >= 2 \
                and not it.keywords:
            out = []
            for t, a in zip(target.elts, it.args):
                owner = self.of(a, where, node.lineno)
                if owner is None:
                    return None
                var = _tensor_var(t, a)
                if var is None:
                    return None
                out.append((var, owner))
            return out
        owner = self.of(it, where, node.lineno)
        var = _tensor_var(target, it) if owner is not None else None
        return None if var is None or owner is None else [(var, owner)]


def _tensor_var(t: ast.AST, it: ast.AST) -> str | None:
    """The name bound to the tensor: ``p``, or ``p`` of ``(name, p)`` over ``named_*()``."""
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[1], ast.Name) \
            and "named_" in ast.unparse(it):
        return t.elts[1].id
    return None


def _root(e: ast.AST) -> str | None:
    """``p`` of ``p``, ``p.data``, ``p.data[...]``, ``p.data.mul_(d)``."""
    while True:
        if isinstance(e, (ast.Attribute, ast.Subscript)):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr.endswith("_") and not e.func.attr.startswith("_"):
            e = e.func.value
        else:
            break
    return e.id if isinstance(e, ast.Name) else None


def _writes(body: list[ast.stmt]) -> Iterator[tuple[ast.AST, str]]:
    """(node, written loop name) for each copy into a tensor in ``body``: ``p.copy_(..)``,
    ``p.data.mul_(a).add_(..)``, ``p.data = ..``, ``p[...] = ..``."""
    for n in (x for s in body for x in walk(s)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in WRITES_FROM and (r := _root(n.func.value)) is not None:
            yield n, r
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, (ast.Attribute, ast.Subscript)) and (r := _root(t)) is not None:
                    yield n, r


def _target_names(t: ast.AST) -> set[str]:
    """The names a ``for`` target binds (``p``, ``(name, p)``, ``(a, b)``)."""
    return {n.id for n in walk(t) if isinstance(n, ast.Name)}


def _loads(body: list[ast.stmt]) -> set[str]:
    return {n.id for s in body for n in walk(s) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}


class WeightCopyReadsOnlyItself(Rule):
    """A loop over two models' tensors (`zip(ema.parameters(), model.parameters())`) writes
    into one of them from itself: the other model is never read.

    Why: an EMA (mean-teacher, model-averaging) update copies or blends the trained model's
    weights into the average: `p_ema.copy_(p)`, `p_ema.mul_(d).add_(p, alpha=1 - d)`. Written
    `p_ema.copy_(p_ema)` (enhanced-UGATIT), or with both lists taken from the same model, the
    write reads only the tensor it writes: the average stays at its random initial weights
    while the model trains, and evaluating or distilling from it silently uses untrained
    weights. Nothing fails. Read the other loop variable.
    Known limits: the lists must be module tensors (`parameters()`, `buffers()`,
    `state_dict().values()`, maybe through `list(...)`, a local name or a `self` attribute set
    once); a loop that reads the other variable anywhere in its body is not reported.
    """

    code = "GT457"
    name = "weight-copy-reads-only-itself"
    message = ("`{write}` writes the tensors of `{dst}` from themselves: the loop never reads "
               "`{other}` (the tensors of `{src}`), so `{dst}` keeps its own weights; {hint}")
    triggers = ("zip",)
    gate_statements = True
    examples = [
        Bad("""
            import torch

            @torch.no_grad()
            def update_ema(ema, model, decay=0.999):
                for p_ema, p in zip(ema.parameters(), model.parameters()):
                    p_ema.mul_(decay).add_(p_ema, alpha=1 - decay)
            """, at=(6, 8)),
        Bad("""
            class Teacher:
                def __init__(self, student, teacher):
                    self.student_params = list(student.parameters())
                    self.teacher_params = list(student.parameters())

                def step(self, alpha=0.99):
                    for t, s in zip(self.teacher_params, self.student_params):
                        t.data.mul_(alpha).add_(s.data, alpha=1 - alpha)
            """, at=(8, 12)),
        Good("""
            import torch

            @torch.no_grad()
            def update_ema(ema, model, decay=0.999):
                for p_ema, p in zip(ema.parameters(), model.parameters()):
                    p_ema.mul_(decay).add_(p, alpha=1 - decay)
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        targets = _target_names(node.target)
        if len(targets) < 2 or not any(var in targets for _, var in _writes(node.body)):
            return  # no write into a loop variable: nothing to ask about the streams
        t = ctx.memo("gt457-tensors", ctx.tree, lambda: Tensors(ctx))
        streams = t.loop(node)
        if streams is None or len(streams) != 2:
            return
        (a, oa), (b, ob) = streams
        loads = _loads(node.body)
        same = oa and oa == ob
        for w, var in _writes(node.body):
            if var not in (a, b):
                continue
            other, src = (b, ob) if var == a else (a, oa)
            dst = oa if var == a else ob
            if other in loads and not same:
                continue
            hint = (f"both lists are taken from `{oa}`; take one from the other model"
                    if same else f"read `{other}`")
            yield self.report(w, ctx, write=ctx.source(w)[:60], dst=dst or var, other=other,
                              src=src or other, hint=hint)
            return


class LoopVariableRebound(Rule):
    """Inside a loop over a model's tensors, the loop variable is assigned (`param =
    ema_param`) and not read again.

    Why: `for param, ema_param in zip(params, ema_params): param = ema_param` rebinds the name
    `param` to the other tensor for the rest of the iteration; the model's parameter is not
    touched. Meant as a weight copy (MixMatch's `WeightEMA.__init__`, a teacher initialised
    from the student), it leaves the two models with their different random initial weights,
    silently. Copy into the tensor instead: `param.data.copy_(ema_param.data)` (under
    `torch.no_grad()`, `param.copy_(ema_param)`).
    Known limits: the loop must walk module tensors (see GT457); an assignment whose name is
    read later in the loop body is a rebinding on purpose and is not reported.
    """

    code = "GT458"
    name = "loop-variable-rebound"
    message = ("`{stmt}` rebinds the loop variable `{var}`: it copies nothing into the tensors "
               "of `{owner}`, which keep their values; copy in place: `{var}.data.copy_(...)`")
    triggers = ("parameters", "state_dict", "buffers")
    examples = [
        Bad("""
            def init_teacher(student, teacher):
                for p_s, p_t in zip(student.parameters(), teacher.parameters()):
                    p_t = p_s.detach().clone()
            """, at=(3, 8)),
        Good("""
            def init_teacher(student, teacher):
                for p_s, p_t in zip(student.parameters(), teacher.parameters()):
                    p_t.data.copy_(p_s.data)
            """),
        Good("""
            def norms(model):
                out = []
                for p in model.parameters():
                    p = p.detach().flatten()
                    out.append(p.norm())
                return out
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        targets = _target_names(node.target)
        found = []  # loop variables assigned and not read again: syntax first, streams after
        for i, s in enumerate(node.body):
            for n in of_types(s, (ast.Assign,)):
                if len(n.targets) == 1 \
                        and isinstance(n.targets[0], ast.Name) and n.targets[0].id in targets:
                    var = n.targets[0].id
                    if var not in _loads(node.body[i + 1:]) and not self._read_in(s, n, var):
                        found.append((n, var))
        if not found:
            return
        t = ctx.memo("gt457-tensors", ctx.tree, lambda: Tensors(ctx))
        owners = dict(t.loop(node) or ())
        for n, var in found:
            if var in owners:
                yield self.report(n, ctx, stmt=ctx.source(n)[:60], var=var,
                                  owner=owners[var] or "the module")

    @staticmethod
    def _read_in(s: ast.stmt, n: ast.Assign, var: str) -> bool:
        """Whether ``var`` is read in ``s`` after ``n`` (``s`` may be a compound statement)."""
        if s is n:
            return False
        return any(isinstance(x, ast.Name) and x.id == var and isinstance(x.ctx, ast.Load)
                   and (x.lineno, x.col_offset) > (n.lineno, n.col_offset) for x in walk(s))

