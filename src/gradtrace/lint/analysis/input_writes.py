"""Modules whose forward writes its input in place: the first thing ``forward`` does with its
input is a layer that starts with an in-place activation.

# NOTE [input written in place]
``nn.ReLU(inplace=True)`` (and the other activations and dropouts with ``inplace``) overwrite
the tensor they are given. As the first layer of a block (``nn.Sequential(nn.ReLU(True),
conv, ...)``, or the first entry appended to the list a Sequential is built from), the tensor
overwritten is the block's *input*: the caller's tensor. Every other reader of that tensor
then sees ``relu(x)``, not ``x``: a skip connection ``out = self.conv(x); out += x`` adds the
activated input (vq-vae-2#60), and an op that saved the tensor for backward
(``F.normalize(emb)`` before ``classifier(emb)``) makes backward raise "modified by an inplace
operation" (powerful-benchmarker#78). :func:`input_writer` finds such a class once per file;
rules decide whether the input has another reader.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.modules import ClassInfo, _own_statements
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, child_nodes
from gradtrace.lint.statement_shapes import exit_after

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# layers that overwrite their input when built with `inplace=True` (checked on torch 2.13)
INPLACE_LAYERS = frozenset("torch.nn." + n for n in (
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "Hardtanh", "Hardswish",
    "Hardsigmoid", "SiLU", "Mish", "RReLU", "Threshold", "Dropout", "Dropout1d", "Dropout2d",
    "Dropout3d", "AlphaDropout"))
# reads of a tensor that see its metadata only, not its values
METADATA = frozenset({"shape", "size", "dim", "ndim", "device", "dtype", "numel", "is_cuda"})


@dataclass(frozen=True)
class InputWrite:
    """``forward``'s input ``param`` is first given to ``self.<attr>``, whose first layer
    (``layer``, the constructor call) writes it in place, at statement ``first``."""

    cls: str
    attr: str
    param: str
    layer: ast.Call
    first: ast.stmt


def inplace_layer(call: ast.AST, ctx: Context) -> bool:
    """``nn.ReLU(inplace=True)``, ``nn.ReLU(True)``, ``nn.LeakyReLU(0.2, True)``."""
    if not isinstance(call, ast.Call) or (ctx.qualified_name(call.func) or "") not in \
            INPLACE_LAYERS:
        return False
    for k in call.keywords:
        if k.arg == "inplace":
            return isinstance(k.value, ast.Constant) and k.value.value is True
    return bool(call.args) and isinstance(call.args[-1], ast.Constant) \
        and call.args[-1].value is True


def first_layer(value: ast.AST | None, method: ast.AST, ctx: Context, depth: int = 0
                ) -> ast.Call | None:
    """The in-place layer ``value`` starts with: itself, the first argument of an
    ``nn.Sequential``, or the first entry of the list a ``nn.Sequential(*layers)`` unpacks
    (built in ``method``). None: it does not start with one (or it is not seen)."""
    if depth > 4 or not isinstance(value, ast.Call):
        return None
    if inplace_layer(value, ctx):
        return value
    if ctx.qualified_name(value.func) != "torch.nn.Sequential" or not value.args:
        return None
    a0 = value.args[0]
    if isinstance(a0, ast.Starred) and isinstance(a0.value, ast.Name):
        a0 = _first_entry(a0.value.id, method, value.lineno)
    return first_layer(a0, method, ctx, depth + 1)


def _first_entry(name: str, method: ast.AST, line: int) -> ast.expr | None:
    """The first entry of the list ``name`` as ``method`` builds it before ``line``:
    ``name = [a, ...]``, or ``name = []`` then the first ``name.append(a)`` /
    ``name += [a]`` / ``name.extend([a])`` in source order. None when anything else before
    ``line`` may change the first entry: ``name[0] = ...`` (timm's Xception replaces its
    leading in-place ReLU so), ``name = name[1:]``, ``name.insert(...)``, ``del name[...]``."""
    first: ast.expr | None = None
    started = False
    for s in _own_statements(method):
        if s.lineno >= line:
            break
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = s.targets if isinstance(s, (ast.Assign, ast.Delete)) else [s.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and dotted(t.value) == name:
                    return None
            if isinstance(s, ast.Assign) and any(dotted(t) == name for t in s.targets):
                if started or not isinstance(s.value, ast.List):
                    return None
                started = True
                first = s.value.elts[0] if s.value.elts else None
                continue
            if started and first is None and isinstance(s, ast.AugAssign) \
                    and dotted(s.target) == name:
                v = s.value
                if not (isinstance(v, ast.List) and v.elts):
                    return None
                first = v.elts[0]
                continue
        if not started or isinstance(s, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
                                         ast.AsyncWith, ast.Try)):
            continue  # (a block's statements come next, in source order)
        for c in bfs_walk(s):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                    and dotted(c.func.value) == name:
                if c.func.attr in ("insert", "pop", "reverse", "sort", "clear", "remove"):
                    return None
                if first is None and c.args and c.func.attr == "append":
                    first = c.args[0]
                elif first is None and c.args and c.func.attr == "extend":
                    v = c.args[0]
                    if not (isinstance(v, (ast.List, ast.Tuple)) and v.elts):
                        return None
                    first = v.elts[0]
    return first


def reads(stmt: ast.AST, name: str) -> list[ast.Name]:
    """Reads of ``name``'s values in ``stmt`` (not ``name.shape``, ``name.size()``...)."""
    parents: dict[int, ast.AST] = {}
    for n in bfs_walk(stmt):
        for c in child_nodes(n):
            parents[id(c)] = n
    out = []
    for n in bfs_walk(stmt):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            p = parents.get(id(n))
            if isinstance(p, ast.Attribute) and p.attr in METADATA:
                continue
            if isinstance(p, ast.Call) and dotted(p.func) in ("len", "isinstance", "type"):
                continue
            out.append(n)
    return out


def _input_write(cls: ClassInfo, ctx: Context) -> InputWrite | None:
    fwd = cls.methods.get("forward")
    if fwd is None or not cls.is_module:
        return None
    params = [a.arg for a in (*fwd.args.posonlyargs, *fwd.args.args)][1:]
    if not params:
        return None
    p = params[0]
    for s in _own_statements(fwd):
        if isinstance(s, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            if any(reads(x, p) for x in _headers(s)):
                return None
            continue
        if not reads(s, p):
            continue
        for n in bfs_walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and dotted(n.func.value) == "self" and n.args \
                    and isinstance(n.args[0], ast.Name) and n.args[0].id == p:
                info = cls.attrs.get(n.func.attr)
                if info is None:
                    return None
                layer = first_layer(info.value, info.method, ctx)
                if layer is None:
                    return None
                return InputWrite(cls.name, n.func.attr, p, layer, s)
        return None
    return None


COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)


def aliased_rewrite(cls: ClassInfo, ctx: Context) -> tuple[InputWrite, ast.Name] | None:
    """(the write, a later read) when ``forward`` gives its input, under its name or an alias
    (``identity = x``), to ``self.<attr>`` whose first layer writes it in place, anywhere in
    ``forward`` (not only as the first use, on any branch), and a name still bound to that
    tensor is read by a later statement that can run after the call: ``identity = x`` /
    ``out = self.relu(x)`` / ``out += identity`` adds ``relu(x)``, not ``x``
    (NOTE [input written in place]). A name bound again first no longer holds the input."""
    fwd = cls.methods.get("forward")
    if fwd is None or not cls.is_module or not any(
            isinstance(i.value, ast.Call) and first_layer(i.value, i.method, ctx) is not None
            for i in cls.attrs.values()):  # no in-place layer on `self`: nothing to read
        return None
    params = [a.arg for a in (*fwd.args.posonlyargs, *fwd.args.args)][1:]
    if not params:
        return None
    p = params[0]
    names = {p}
    write: InputWrite | None = None
    scope = None
    end: int | None = None
    for s in _own_statements(fwd):
        if isinstance(s, COMPOUND) or isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.ClassDef)):
            if write is None and isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
                return None  # a loop: the call may run again on what it wrote
            continue
        if write is not None:
            scope = scope or ctx.scope(fwd)
            if end is not None and s.lineno > end:
                return None  # `if self.preact: return self.conv(self.act(x))`
            if not scope.exclusive(write.first, s):
                for n in sorted(names):
                    got = reads(s, n)
                    if got:
                        return write, got[0]
            names = {n for n in names if not _binds_name(s, n)}
            if not names:
                return None
            continue
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) \
                and s.value.id in names and all(isinstance(t, ast.Name) for t in s.targets):
            names.update(t.id for t in s.targets)  # type: ignore[attr-defined]
            continue
        for n in bfs_walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and dotted(n.func.value) == "self" and n.args \
                    and isinstance(n.args[0], ast.Name) and n.args[0].id in names:
                info = cls.attrs.get(n.func.attr)
                layer = first_layer(info.value, info.method, ctx) if info else None
                if layer is not None:
                    write = InputWrite(cls.name, n.func.attr, n.args[0].id, layer, s)
                    others = [r for nm in sorted(names) for r in reads(s, nm)
                              if r is not n.args[0]]
                    if others:
                        return write, others[0]
                    end = s.lineno if isinstance(s, (ast.Return, ast.Raise)) \
                        else exit_after(fwd, s)
                    break
        names = {n for n in names if not _binds_name(s, n)}
        if not names:
            return None
    return None


def _binds_name(s: ast.stmt, name: str) -> bool:
    targets: list[ast.AST] = []
    if isinstance(s, ast.Assign):
        targets = list(s.targets)
    elif isinstance(s, ast.AnnAssign):
        targets = [s.target]  # (`x += y` writes the same tensor: not a new binding)
    return any(isinstance(n, ast.Name) and n.id == name for t in targets for n in bfs_walk(t))


def _headers(s: ast.stmt) -> list[ast.AST]:
    """The expressions a compound statement evaluates before its body."""
    out: list[ast.AST] = []
    for f in ("test", "iter", "target"):
        v = getattr(s, f, None)
        if isinstance(v, ast.AST):
            out.append(v)
    out.extend(getattr(s, "items", ()))
    return out


# NOTE [positional True]: an in-place layer spelt without the keyword (`nn.ReLU(True)`,
# `nn.LeakyReLU(0.2, True)`) is the regex
#     (?:ReLU6?|ELU|Hardtanh|Hardswish|Hardsigmoid|SiLU|Mish|Threshold|Dropout\w*)
#     \s*\((?:[^()]|\([^()]*\))*\bTrue\s*\)
# whose search tried every position of the file (no literal starts it). It is found from its
# end instead: `True )` is rare in code (a literal prefix: `\b` first would lose it, so it is
# tested by hand), a layer's name is not. The middle holds only groups one deep, so reading
# leftwards from `True` a `)` opens a group that the next `(` closes, a second `)` before that
# `(` fails, and the first `(` outside a group is the only place the middle can begin. Before
# it, after `\s*` (`str.isspace` is the regex's `\s`), the run of word characters (`isalnum`
# or `_`, the regex's `\w`) must end with a layer's name or hold `Dropout` (`Dropout\w*`).
# The same answer as the regex on every file of the corpora (code and raw text) and 300,000
# random strings (docs/triage/speed41b.md).
_TRUE_CLOSE = re.compile(r"True\s*\)")
_LAYER_ENDS = ("ReLU", "ReLU6", "ELU", "Hardtanh", "Hardswish", "Hardsigmoid", "SiLU", "Mish",
               "Threshold")


def _positional_inplace(code: str) -> bool:
    """Whether ``code`` calls a layer with a positional ``True`` (NOTE [positional True])."""
    for m in _TRUE_CLOSE.finditer(code):
        pos = m.start()
        if pos and (code[pos - 1].isalnum() or code[pos - 1] == "_"):  # `\bTrue`
            continue
        while True:
            o = code.rfind("(", 0, pos)
            if o < 0:
                break
            c = code.rfind(")", o, pos)
            if c >= 0:  # a group `( ... )` of the middle, one deep only
                if code.rfind(")", o, c) >= 0:
                    break
                pos = o
                continue
            j = o
            while j and code[j - 1].isspace():
                j -= 1
            k = j
            while k and (code[k - 1].isalnum() or code[k - 1] == "_"):
                k -= 1
            word = code[k:j]
            if word.endswith(_LAYER_ENDS) or "Dropout" in word:
                return True
            break
    return False


def input_writers(ctx: Context) -> dict[str, InputWrite]:
    """The module classes of the file whose forward writes its input in place, by class name
    (NOTE [input written in place]); computed once per file. A file whose code spells neither
    ``inplace`` nor a layer called with a positional ``True`` has none (no class is read)."""
    def make() -> dict[str, InputWrite]:
        out: dict[str, InputWrite] = {}
        if not spells_inplace_layer(ctx):
            return out
        for name, cls in ctx.analysis.classes.items():
            w = _input_write(cls, ctx)
            if w is not None:
                out[name] = w
        return out
    return ctx.memo("input-writers", ctx.tree, make)


def spells_inplace_layer(ctx: Context) -> bool:
    """The file's code may build an in-place layer: it spells ``inplace``, a layer called with
    a positional ``True``, or imports one under another name (``ReLU as Act``)."""
    def make() -> bool:
        code = ctx.code
        renamed = any(q in INPLACE_LAYERS and local != q.rpartition(".")[2]
                      for local, q in ctx.imports.aliases.items())
        return "inplace" in code or renamed or _positional_inplace(code)
    return ctx.memo("spells-inplace-layer", ctx.tree, make)
