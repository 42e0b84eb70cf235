"""GT555: an optimizer cleared only after its step, while another optimizer's loss backwards
through its model in the same pass.

# NOTE [leftover from another loss]
A pass (a loop body, or a step function: one call per batch) steps two optimizers over
disjoint known parameters and clears the one judged only after its own step. Another backward
of the pass that runs before its step with no clear of it between (the other optimizer's
backward and step, then its own backward), or after its clear (the next pass's order), fills
its parameters' ``.grad`` when that loss is computed from a call of its model, or of a module
of the file whose ``forward`` runs the model into what it returns in the arm the call's flags
take (``self.gan(x, disc_pass=True)``: NOTE [asserted flags]; an arm that returns first, a
detached or ``.data`` part are not followed). The owners are read as the method reads them
(``self.gan = gan`` in ``__init__``), through a method of a file class that lists its
submodules' parameters, and minus a set difference (``set(vae.parameters()) -
set(vae.discr.parameters())``). A function that mentions ``requires_grad`` (a critic frozen
around the other backward), a clearing word between that is not a known other optimizer's
``zero_grad()``, an optimizer whose parameters are unknown: silent."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.statement_shapes import always_jumps
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._clear_facts import covers
from gradtrace.lint.rules.training_loop._loop import (
    MANUAL_ZERO_RE, Backward, LoopFacts, Step, _disjoint, _owners, _stepped_expr)
from gradtrace.lint.rules.training_loop._reach import _live_calls, _reached
from gradtrace.lint.analysis.graph_deps import followed_value, loads
from gradtrace.lint.analysis.reach import reaching

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


def _self_owners(f: LoopFacts, owners: frozenset[str]) -> frozenset[str]:
    """Owners as the method reads them: an optimizer built in ``__init__`` over
    ``soundstream.disc.parameters()`` with ``self.soundstream = soundstream`` there is over
    ``self.soundstream.disc``."""
    cls = f.ctx.class_def
    if cls is None:
        return owners
    out = set(owners)
    for o in owners:
        root, dot, rest = o.partition(".")
        if o.startswith("self.") or root == "self":
            continue
        held = {dotted(t) for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                and root in {a.arg for a in m.args.args}
                for n in ast.walk(m) if isinstance(n, ast.Assign)
                and isinstance(n.value, ast.Name) and n.value.id == root
                for t in n.targets if (dotted(t) or "").count(".") == 1
                and (dotted(t) or "").startswith("self.")}
        if len(held) == 1:
            out.add(held.pop() + dot + rest)  # type: ignore[operator]
    return frozenset(out)


def _opt_owners(f: LoopFacts, s: Step) -> frozenset[str]:
    """The owners of ``s``'s parameters (:func:`_expr_owners`)."""
    return _expr_owners(f, _stepped_expr(s), s.call.lineno)


def _expr_owners(f: LoopFacts, expr: ast.AST | None, line: int) -> frozenset[str]:
    """The owners of ``s``'s parameters as the method reads them; also through a method of a
    class of the file that returns the parameters of some of its submodules
    (``Adam(model.gen_parameters())``, ``return [*self.enc.parameters(),
    *self.dec.parameters()]``: over ``model.enc`` and ``model.dec``)."""
    got = _owners(f, expr, line)
    if not got and expr is not None:
        k = f.ctx.analysis.kind(expr, f.scope, line)
        call = k.node if k is not None else None
        if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Call):
            got = _method_params(f, call.args[0])
    return _self_owners(f, got)


def _excluded(f: LoopFacts, expr: ast.AST | None, line: int) -> frozenset[str]:
    """The owners whose parameters the optimizer's list takes out by a set difference
    (``set(vae.parameters()) - set(vae.discr.parameters())``: ``vae.discr``), through the
    names of the function that builds it."""
    k = f.ctx.analysis.kind(expr, f.scope, line) if expr is not None else None
    call = k.node if k is not None else None
    if not isinstance(call, ast.Call) or not call.args:
        return frozenset()
    fn = next((d for d in _defs(f) if d.lineno <= call.lineno <= (d.end_lineno or 0)), None)
    sc = f.ctx.scope(fn) if fn is not None else f.ctx.scope(f.ctx.tree)
    out: set[str] = set()
    work, seen = [call.args[0]], 0
    while work and seen < 20:
        seen += 1
        e = work.pop()
        if isinstance(e, ast.Name):
            b = sc.binding_before(e.id, e.lineno)
            if b is not None and b.value is not None:
                work.append(b.value)
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
                and e.func.id in ("list", "set", "tuple") and len(e.args) == 1:
            work.append(e.args[0])
        elif isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub):
            work.append(e.left)
            out |= _param_receivers(e.right, sc)
    return _self_owners(f, frozenset(out))


def _param_receivers(e: ast.AST, sc: Scope) -> set[str]:
    """``x`` for each ``x.parameters()`` ``e`` is made of (through one name)."""
    if isinstance(e, ast.Name):
        b = sc.binding_before(e.id, e.lineno)
        e = b.value if b is not None and b.value is not None else e
    return {d for n in ast.walk(e) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "parameters" and (d := dotted(n.func.value))}


def _defs(f: LoopFacts) -> list[ast.AST]:
    """The functions of the file and the methods of the class around ``f``."""
    out: list[ast.AST] = list(f.ctx.analysis.functions.values())
    cls = f.ctx.class_def
    if cls is not None:
        out += [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out


def _apart(f: LoopFacts, a: frozenset[str], a_expr: ast.AST | None, a_line: int,
           b: frozenset[str]) -> bool:
    """No owner of ``b`` is, contains or is inside an owner of ``a`` other than through an
    owner ``a``'s optimizer takes out (:func:`_excluded`)."""
    if _disjoint(a, b):
        return True
    out = _excluded(f, a_expr, a_line)
    return bool(out) and all(any(o == x or o.startswith(x + ".") for x in out) for o in b) \
        and all(not x.startswith(o + ".") for x in a for o in b)


def _method_params(f: LoopFacts, call: ast.Call) -> frozenset[str]:
    """``x.m()`` where ``m`` is a method of one class of the file only, returning a list of
    ``*self.<a>.parameters()`` (or a list of ``self.<a>.parameters()`` chained): ``x.<a>``."""
    func = call.func
    recv = dotted(func.value) if isinstance(func, ast.Attribute) else None
    if recv is None or call.args or call.keywords:
        return frozenset()
    defs = [c.methods[func.attr] for c in f.ctx.analysis.classes.values()  # type: ignore
            if func.attr in c.methods]  # type: ignore[union-attr]
    if len(defs) != 1:
        return frozenset()
    rets = [n.value for n in ast.walk(defs[0]) if isinstance(n, ast.Return)]
    if len(rets) != 1 or not isinstance(rets[0], (ast.List, ast.Tuple)):
        return frozenset()
    out: set[str] = set()
    for e in rets[0].elts:
        e = e.value if isinstance(e, ast.Starred) else e
        d = dotted(e.func.value) if isinstance(e, ast.Call) and isinstance(
            e.func, ast.Attribute) and e.func.attr == "parameters" else None
        if d is None or not d.startswith("self.") or d.count(".") != 1:
            return frozenset()
        out.add(recv + d[4:])
    return frozenset(out)


def _runs_inside(f: LoopFacts, call: ast.Call, owner: str) -> bool:
    """``call`` (of a module of a class of the file, ``self.gan(x)``) runs ``owner``, one of
    its submodules (``self.gan.disc``), into what it returns: a return of its ``forward`` in
    an arm the call's flags take (its constant bool arguments, or the defaults it leaves:
    NOTE [asserted flags]) is computed from a call of ``self.disc`` with its history kept."""
    from gradtrace.lint.analysis.flag_arms import _dead, known_flags
    from gradtrace.lint.nodes import parent_map

    called = dotted(call.func) or ""
    k = f.ctx.analysis.kind(call.func, f.scope, call.lineno)
    cls = f.ctx.analysis.classes.get(k.cls or "") if k is not None else None
    fwd = cls.method("forward") if cls is not None else None
    if fwd is None:
        return False
    flags = known_flags(f.ctx, f.scope, call, fwd)
    a = fwd.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)]
    for name, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
        if isinstance(d, ast.Constant) and isinstance(d.value, bool):
            flags.setdefault("$" + name, d.value)
    sub = "self." + owner[len(called) + 1:].partition(".")[0]
    parents = parent_map(fwd)
    scope = f.ctx.scope(fwd)
    for r in ast.walk(fwd):
        if isinstance(r, ast.Return) and r.value is not None \
                and not _dead(r, fwd, parents, flags) and not _after_taken_exit(
                    r, fwd, parents, flags) and _feeds_from(f, scope, r, sub):
            return True
    return False


def _after_taken_exit(r: ast.stmt, fn: ast.AST, parents: dict[int, ast.AST],
                      flags: dict[str, object]) -> bool:
    """An ``if`` before ``r`` in its block (or an enclosing one) whose arm the flags take
    always leaves the function (``if return_discr_loss: ...; return d_loss``)."""
    from gradtrace.lint.analysis.flag_truth import truth_under

    child: ast.AST = r
    p = parents.get(id(r))
    while p is not None:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(p, field, None)
            if isinstance(block, list) and child in block:
                for prev in block[:block.index(child)]:
                    if isinstance(prev, ast.If):
                        t = truth_under(prev.test, flags)
                        arm = prev.body if t is True else prev.orelse if t is False else []
                        if any(map(always_jumps, arm)):
                            return True
        if p is fn:
            break
        child, p = p, parents.get(id(p))
    return False


def _feeds_from(f: LoopFacts, scope: Scope, r: ast.Return, sub: str) -> bool:
    """The value ``r`` returns is computed from a call of ``sub`` with its history kept
    (through the function's bindings; a detached or ``.data`` part is not followed)."""
    seen: set[int] = set()
    work: list[tuple[ast.AST, int]] = [(r.value, r.lineno)]  # type: ignore[list-item]
    while work:
        e, ln = work.pop()
        if any(dotted(c.func) == sub or isinstance(c.func, ast.Name) and c.func.id == "map"
               and c.args and dotted(c.args[0]) == sub for c in _live_calls(e)):
            return True  # (`map(self.discr, (fake, real))` calls it too)
        for name, _node in loads(e):
            for b in reaching(scope, name, ln, prefix=True):
                if id(b) not in seen and (v := followed_value(b, f.ctx)) is not None:
                    seen.add(id(b))
                    work.append((v, b.line))
    return False


def _reaches(f: LoopFacts, b: Backward, owners: frozenset[str]) -> bool:
    """The loss of ``b`` is computed from a call of one of ``owners``, or of a module of the
    file whose forward runs one of them into what it returns."""
    if _reached(f, b, owners):
        return True
    for o in _reached(f, b, owners, inner=True):
        for c in _called(f, b):
            d = dotted(c.func) or ""
            if o.startswith(d + ".") and _runs_inside(f, c, o):
                return True
    return False


def _called(f: LoopFacts, b: Backward) -> list[ast.Call]:
    """The dotted callees the loss of ``b`` is computed from (through the function's
    bindings)."""
    from gradtrace.lint.analysis.graph_deps import graphs
    from gradtrace.lint.rules.training_loop._reach import _live_calls

    if b.loss is None:
        return []
    values: list[ast.AST] = [b.loss]
    values += [d.value for d in graphs(f.scope).deps(b.loss, b.stmt.lineno).bindings
               if d.value is not None]
    return [c for v in values for c in _live_calls(v) if dotted(c.func)]


class LeftoverGradientFromOtherLoss(LoopRule):
    """An optimizer is cleared only after its step, while the loss of another optimizer
    backwards through its model in the same pass: its step applies that loss's gradient too.

    Why: `backward()` fills the `.grad` of every parameter its loss reaches, whichever
    optimizer holds it. A GAN (or any two-optimizer) step that clears each optimizer right
    after its own `step()` (`loss_g.backward(); opt_g.step(); opt_g.zero_grad()`, then
    `loss_d.backward(); opt_d.step(); opt_d.zero_grad()`) leaves the generator loss's
    gradient on the discriminator (`loss_g = -D(G(z)).mean()` runs `D`): the discriminator's
    next step follows its own loss plus the generator's, which pushes the other way.
    Clear each optimizer just before its own backward.
    Known limits: both optimizers' parameters must be known and disjoint, the other loss
    must be computed from a call of the model (or of a module of the file whose `forward`
    calls it), and the function must not switch `requires_grad` anywhere (CycleGAN's
    `set_requires_grad(netD, False)` keeps the discriminator out of the generator's pass):
    NOTE [leftover from another loss].
    """

    code = "GT555"
    gate_statements = True
    name = "leftover-gradient-from-other-loss"
    message = ("`{clear}` runs only after `{opt}`'s step, and `{other}` (line {other_line}) "
               "backwards a loss computed from `{owner}` for `{other_opt}`: `{opt}.step()` "
               "(line {step_line}) applies that loss's gradient on `{owner}` too; clear "
               "`{opt}` just before its own backward")
    triggers = ("zero_grad",)
    function_needs = ("backward", "step", "zero_grad")
    examples = [
        Bad("""
            import torch
            G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
            opt_g = torch.optim.Adam(G.parameters())
            opt_d = torch.optim.Adam(D.parameters())
            for real, z in loader:
                loss_g = -D(G(z)).mean()
                loss_g.backward()
                opt_g.step()
                opt_g.zero_grad()
                loss_d = D(G(z).detach()).mean() - D(real).mean()
                loss_d.backward()
                opt_d.step()
                opt_d.zero_grad()
            """, at=(13, 4)),
        Good("""
            import torch
            G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
            opt_g = torch.optim.Adam(G.parameters())
            opt_d = torch.optim.Adam(D.parameters())
            for real, z in loader:
                loss_g = -D(G(z)).mean()
                loss_g.backward()
                opt_g.step()
                opt_g.zero_grad()
                opt_d.zero_grad()
                loss_d = D(G(z).detach()).mean() - D(real).mean()
                loss_d.backward()
                opt_d.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        text = ctx.code if isinstance(f.node, ast.Module) else f.text(f.node)
        if "requires_grad" in text or not f.steps:
            return
        for s in f.steps:
            got = self._leftover(f, s)
            if got is not None:
                yield got

    def _leftover(self, f: LoopFacts, s: Step) -> Finding | None:
        if s.closure:
            return None
        loop = f.innermost_loop(s.stmt)
        if loop is None and not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None

        def in_pass(st: ast.stmt) -> bool:
            return f.inside(st, loop) if loop is not None else True

        owners = _opt_owners(f, s)
        if not owners:
            return None
        zs = [z for z in f.zero_grads if in_pass(z.stmt) and covers(f, z, s)]
        if not zs or not all(f.before(s.stmt, z.stmt) for z in zs):
            return None
        mine = [b for b in f.backwards if b.accumulates and in_pass(b.stmt)
                and f.before(b.stmt, s.stmt)]
        for b in f.backwards:
            if not b.accumulates or not in_pass(b.stmt):
                continue
            if f.before(b.stmt, s.stmt):
                s2 = next((x for x in f.steps if x.optimizer != s.optimizer and in_pass(x.stmt)
                           and f.before(b.stmt, x.stmt) and f.before(x.stmt, s.stmt)), None)
                own = [m for m in mine if s2 is not None and f.before(s2.stmt, m.stmt)]
                spans = [(b.stmt.lineno, s.stmt.lineno)]
            elif all(f.before(z.stmt, b.stmt) for z in zs):
                s2 = next((x for x in f.steps if x.optimizer != s.optimizer and in_pass(x.stmt)
                           and f.before(b.stmt, x.stmt)), None)
                own = [m for m in mine if all(not f.before(x.stmt, s.stmt) or
                                              f.before(x.stmt, m.stmt) for x in f.steps
                                              if x.optimizer != s.optimizer and in_pass(x.stmt))]
                body = loop.body if loop is not None else f.node.body  # type: ignore[attr-defined]
                end = (loop if loop is not None else f.node).end_lineno or 0  # type: ignore
                spans = [(b.stmt.lineno, end + 1), (body[0].lineno - 1, s.stmt.lineno)]
            else:
                continue
            if s2 is None or not own or not any(_reaches(f, m, owners) for m in own):
                continue
            other = _opt_owners(f, s2)
            if not other or not _apart(f, other, _stepped_expr(s2), s2.call.lineno, owners) \
                    or not _reaches(f, b, owners):
                continue
            if any(self._cleared_between(f, s, lo, hi) for lo, hi in spans):
                continue
            hit = sorted(_reached(f, b, owners, inner=True) or owners)[0]
            z = zs[0]
            return self.report(z.call, f.ctx, related=(
                related_at(f.ctx, b.call, "this loss's gradient stays on the parameters"),
                related_at(f.ctx, s.call, "and is applied here")),
                clear=f.ctx.source(z.call), opt=s.optimizer, other=f.ctx.source(b.call),
                other_line=b.call.lineno, owner=hit, other_opt=s2.optimizer,
                step_line=s.call.lineno)
        return None

    @staticmethod
    def _cleared_between(f: LoopFacts, s: Step, lo: int, hi: int) -> bool:
        """A clearing word other than another known optimizer's ``zero_grad()`` on the lines
        strictly between ``lo`` and ``hi``."""
        text = "\n".join(f.ctx.code_lines[lo:hi - 1])
        known = 0
        for z in f.zero_grads:
            if lo < z.call.lineno < hi:
                recv = z.call.func.value if isinstance(z.call.func, ast.Attribute) else None
                other = _expr_owners(f, recv, z.call.lineno)
                if not other or not _apart(f, other, recv, z.call.lineno,
                                           _opt_owners(f, s)):
                    return True
                known += 1
        return len(MANUAL_ZERO_RE.findall(text)) > known
