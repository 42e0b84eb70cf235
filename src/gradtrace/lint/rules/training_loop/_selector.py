"""Two passes through one object of another file that a constant argument switches.

# NOTE [switched foreign calls]
``loss_gen = vq_loss(codebook_loss, imgs, recons, optimizer_idx=0, ...)``, a backward and
the generator's step, then ``loss_disc = vq_loss(codebook_loss, imgs, recons,
optimizer_idx=1, ...)``, a backward and the discriminator's step (taming-transformers'
``VQLPIPSWithDiscriminator``, LlamaGen's ``VQLoss``): one callee, the same tensors, a
constant that selects the branch. The discriminator branch reads ``recons.detach()`` in that
callee's body, which is in another file: whether the second pass reaches the freed graph (or
the stepped parameters) is decided there, not here. So do two different methods of one such
object (descript-audio-codec's ``gan_loss.discriminator_loss(out, wav)``, which detaches
``out`` inside, then ``gan_loss.generator_loss(out, wav)``): the method is the switch. As for two names unpacked from a call of
another file (GT509's ``_split_heads``), the pair is left alone when each pass is stepped by
its own optimizer.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.graph_deps import Deps
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.flow import Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts

WRAPPERS = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel",
                      "torch.nn.parallel.DataParallel",
                      "torch.nn.parallel.distributed.DistributedDataParallel"})


def switched_passes(f: LoopFacts, t: Binding, b1: Backward, b2: Backward, d1: Deps,
                    d2: Deps) -> bool:
    """Both losses come from calls of one object of another file that read ``t`` and differ
    in a constant argument, and each pass is stepped by its own optimizer (one between the
    passes, another after the second) (NOTE [switched foreign calls])."""
    c1, c2 = _calls_of(f, t, b1, d1), _calls_of(f, t, b2, d2)
    if not any((dotted(x.func) == dotted(y.func) and _switched(x, y)
                or _sibling_methods(x, y)) and _foreign(f, x) for x in c1 for y in c2):
        return False
    between = {s.optimizer for s in f.steps
               if f.before(b1.stmt, s.stmt) and f.before(s.stmt, b2.stmt)}
    after = {s.optimizer for s in f.steps if f.before(b2.stmt, s.stmt)}
    return bool(between) and bool(after - between)


def _calls_of(f: LoopFacts, t: Binding, b: Backward, d: Deps) -> list[ast.Call]:
    """The calls in the loss's values that take ``t`` as an argument, or another name unpacked
    from the call that binds ``t`` (``rec, post, z, feat = self(x)``: one graph)."""
    names = {t.name} | _unpacked_with(t)
    names |= {x.name for x in d.bindings if _part_of(value_of(x), names)}
    out = []
    for e in [b.loss] + [value_of(x) for x in d.bindings]:
        for n in bfs_walk(e) if e is not None else ():
            if isinstance(n, ast.Call) and dotted(n.func) is not None and any(
                    dotted(a) in names for a in (*n.args, *(k.value for k in n.keywords))):
                out.append(n)
    return out


def _part_of(v: ast.AST | None, names: set[str]) -> bool:
    """``out.x``, ``out['x']``: a part of one of ``names`` (DAC's ``generator_out = out.x``)."""
    return isinstance(v, (ast.Attribute, ast.Subscript)) and isinstance(v.value, ast.Name) \
        and v.value.id in names


def _unpacked_with(t: Binding) -> set[str]:
    s = t.stmt
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(
            s.targets[0], (ast.Tuple, ast.List)) and isinstance(s.value, ast.Call):
        return {e.id for e in s.targets[0].elts if isinstance(e, ast.Name)}
    return set()


def _switched(x: ast.Call, y: ast.Call) -> bool:
    """A keyword (or a position) given a constant in both calls, two different constants."""
    kx = {k.arg: k.value for k in x.keywords if k.arg is not None}
    ky = {k.arg: k.value for k in y.keywords if k.arg is not None}
    pairs = [(kx[k], ky[k]) for k in kx.keys() & ky.keys()] + list(zip(x.args, y.args))
    return any(isinstance(a, ast.Constant) and isinstance(b, ast.Constant) and a.value != b.value
               for a, b in pairs)


def _sibling_methods(x: ast.Call, y: ast.Call) -> bool:
    """Two different methods of one receiver (``gan_loss.discriminator_loss(out, wav)``, then
    ``gan_loss.generator_loss(out, wav)``): the method chosen is the switch."""
    return isinstance(x.func, ast.Attribute) and isinstance(y.func, ast.Attribute) and \
        x.func.attr != y.func.attr and dotted(x.func.value) is not None and \
        dotted(x.func.value) == dotted(y.func.value)


def _foreign(f: LoopFacts, call: ast.Call) -> bool:
    """The callee is an object made by a class (or factory) that is neither this file's nor
    torch's (for a method, its receiver is); a DDP/DataParallel wrapper is read as the object
    it wraps."""
    return _foreign_object(f, call.func, call.lineno, 0) or isinstance(
        call.func, ast.Attribute) and _foreign_object(f, call.func.value, call.lineno, 0)


def _foreign_object(f: LoopFacts, e: ast.AST, line: int, depth: int) -> bool:
    e = _unmoved(e)
    k = f.ctx.analysis.kind(e, f.scope, line)
    if k is not None and k.cls in WRAPPERS and isinstance(k.node, ast.Call) and k.node.args:
        return depth < 3 and _foreign_object(f, k.node.args[0], k.node.lineno, depth + 1)
    if k is not None and k.cls:
        return _foreign_name(f, k.cls)
    name = dotted(e)
    b = f.scope.binding_before(name, line) if name is not None else None
    v = _unmoved(value_of(b)) if b is not None else _attr_value(f, e)
    if not isinstance(v, ast.Call):
        return False
    q = f.ctx.qualified_name(v.func) or ""
    if q in WRAPPERS and v.args:
        return depth < 3 and _foreign_object(f, v.args[0], b.line, depth + 1)  # type: ignore
    return bool(q) and _foreign_name(f, q) and q not in f.ctx.analysis.functions


def _attr_value(f: LoopFacts, e: ast.AST | None) -> ast.AST | None:
    """What ``self.<a>`` holds when the class assigns it once (``self.loss =
    instantiate_from_config(cfg)`` in ``__init__``)."""
    if not (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
            and e.value.id == "self"):
        return None
    info = f.ctx.analysis.class_of(f.node)
    a = info.attrs.get(e.attr) if info is not None else None
    if a is None or a.later or not isinstance(a.stmt, ast.Assign):
        return None
    return _unmoved(a.stmt.value)


def _foreign_name(f: LoopFacts, cls: str) -> bool:
    return not cls.startswith("torch.") and cls not in f.ctx.analysis.classes and \
        cls.rpartition(".")[2] not in f.ctx.analysis.classes


def _unmoved(e: ast.AST | None) -> ast.AST | None:
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("to", "cuda", "cpu"):
        e = e.func.value
    return e
