"""What the rules on clearing gradients (:mod:`zero_grad`, step_placement.py, micro_steps.py...)
ask of a loop: the loop around a step that accumulates, an optimizer or model built anew each
pass, calls that may clear the gradients elsewhere, a per-call step, and whether a
``zero_grad()`` clears what a step applies."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.analysis.cuts import self_assignments
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.training_loop._clearing import (
    called_by_clearing_function, clearing_functions, helper_zero_grads, only_adjusts,
    self_method_may_clear, through_name)
from gradtrace.lint.rules.training_loop._loop import (
    Backward, LoopFacts, Named, Step, optimizer_like)


def step_loop(f: LoopFacts, s: Step) -> ast.stmt | None:
    """The innermost loop around ``s`` that also runs an accumulating backward."""
    for loop in reversed(f.loops_of(s.stmt)):
        if any(b.accumulates and f.inside(b.stmt, loop)
               for b in f.between(f.backwards, loop.lineno, loop.end_lineno or 0)):
            return loop
    return None


def fresh_each_pass(f: LoopFacts, loop: ast.stmt, s: Step) -> bool:
    """The loop builds a new optimizer or model each pass (nothing to accumulate into)."""
    if f.loop_rebinds(loop, {s.optimizer}):
        return True
    text = f.text(loop)
    if "load_state_dict(" in text or "deepcopy(" in text and not _snapshots_only(loop):
        return True
    return any(b.kind == "module" for x in f.within(loop) for b in f.bindings_at(x))


_TRAINS = frozenset({"parameters", "named_parameters", "train", "forward", "zero_grad"})


def _snapshots_only(loop: ast.stmt) -> bool:
    """Every ``deepcopy`` of the loop is a snapshot (NOTE [snapshot copy]).

    # NOTE [snapshot copy]
    ``best_model = copy.deepcopy(net)`` when the validation improves keeps a copy aside:
    the loop goes on training ``net`` and its gradients still add up. A copy makes the pass
    fresh only when the loop trains the copy: calls it, or reads its ``parameters()``
    (an optimizer over it), runs ``train()``/``forward``/``zero_grad()`` on it. Any other
    ``deepcopy`` (not the whole value of a plain name's assignment) keeps the loop fresh."""
    nodes = list(ast.walk(loop))
    copies = [n for n in nodes if isinstance(n, ast.Call)
              and (dotted(n.func) or "").rpartition(".")[2] == "deepcopy"]
    names = set()
    for c in copies:
        name = _bound_name(nodes, c)
        if name is None:
            return False
        names.add(name)
    for n in nodes:
        if isinstance(n, ast.Call):
            fn = n.func
            if isinstance(fn, ast.Name) and fn.id in names or isinstance(fn, ast.Attribute) \
                    and fn.attr in _TRAINS and isinstance(fn.value, ast.Name) \
                    and fn.value.id in names:
                return False
    return True


def _bound_name(nodes: list[ast.AST], c: ast.Call) -> str | None:
    """The plain name ``c`` is bound to: ``x = c`` or ``a, x = b, c``; else None."""
    for a in nodes:
        if not isinstance(a, ast.Assign) or len(a.targets) != 1:
            continue
        t, v = a.targets[0], a.value
        if v is c:
            return t.id if isinstance(t, ast.Name) else None
        if isinstance(v, ast.Tuple) and isinstance(t, ast.Tuple) and len(t.elts) == len(v.elts):
            for te, ve in zip(t.elts, v.elts):
                if ve is c:
                    return te.id if isinstance(te, ast.Name) else None
    return None


# calls that receive the optimizer but are known not to clear its gradients
KEEPS_GRADS = frozenset({"step", "unscale_", "optimizer_step", "update", "clip_grad_norm_",
                         "clip_grad_value_", "get_lr", "state_dict", "len", "print",
                         "get_last_lr", "scale", "scale_loss"})  # apex `amp.scale_loss(loss, opt)`


# ... and calls named like saving, logging or evaluating (`self.save_model(dir, optimizer)`)
KEEPS_GRADS_RE = re.compile(r"(^|_)(save|saving|checkpoint|ckpt|log|logging|report|print|"
                            r"eval|evaluate|validate)(_|$)")


def _keeps(name: str) -> bool:
    return name in KEEPS_GRADS or bool(KEEPS_GRADS_RE.search(name))


def may_clear_elsewhere(f: LoopFacts, loop: ast.stmt | None, s: Step) -> bool:
    """The loop (None: the whole function) calls a helper of this file that clears
    gradients, or hands the optimizer (or a model) to a call that might
    (``trainer.finish_step(optimizer)``).

    # NOTE [step helper clears]
    A step taken through a helper (``self.strategy.optimizer_step(self.optimizer, model,
    scheduler)``: OpenRLHF's and DeepSpeed-style strategies, Lightning's ``optimizer_step``
    hook) runs a function of this file when one has that name; when its body clears the
    gradients (``optimizer.step(); optimizer.zero_grad()``), the step and the clear are one
    call. ``opt.step()`` itself runs no function of the file."""
    clearing = clearing_functions(f.ctx) if f.ctx.mentions("zero_grad", ".grad") else set()
    steps = {id(st.call) for st in f.steps}  # `opt.step()` runs no function of the file
    for stmt in f.scope.stmts if loop is None else f.within(loop):  # (its run: no scan
        for call in f.calls_of(stmt):  # of a script's statements per step; calls indexed)
            name = dotted(call.func) or ""
            last = name.rpartition(".")[2]
            if id(call) in steps:
                if last != "step" and last in clearing:
                    return True  # NOTE [step helper clears]
                continue
            if last in clearing or self_method_may_clear(f.ctx, call, s.optimizer, _keeps) \
                    or helper_zero_grads(f.ctx, call, f.node):  # NOTE [helper clears by zero_grad]
                return True
            given = (*call.args, *(k.value for k in call.keywords))
            if last not in KEEPS_GRADS and not KEEPS_GRADS_RE.search(last) and \
                    any(dotted(a) == s.optimizer for a in given) and \
                    not only_adjusts(f.ctx, call, last, s.optimizer):
                return True
    return False


def _parameters(node: ast.AST) -> set[str]:
    a = node.args  # type: ignore[attr-defined]
    names = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    return names | {x.arg for x in (a.vararg, a.kwarg) if x is not None}


def per_call_step(f: LoopFacts, s: Step) -> Backward | None:
    """The backward that fills what ``s`` applies, if ``s`` is a per-call step.

    # NOTE [step functions]
    ``s`` runs in no loop that also backwards, inside a function that backwards into
    ``.grad`` and clears nothing: a training step called once per batch (``train_step``,
    ``update``, ``training_forward``), so every call adds to what earlier calls left. Trusted
    (silent): an optimizer the function receives as an argument (its caller owns it and
    clears it: timm's ``NativeScaler.__call__``) or binds itself (fresh per call); a loss
    that is an argument; ``test*`` functions (one step per test); a function that a
    gradient-clearing function of this file calls; an optimizer handed to another call."""
    node = f.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or s.closure or \
            node.name.startswith("test"):
        return None
    params = _parameters(node)
    root = s.optimizer.partition(".")[0]
    if root not in ("self", "cls") and (root in params or root in f.scope.bindings):
        return None
    own = [b for b in f.backwards if b.accumulates and f.before(b.stmt, s.stmt)]
    if not own or all((dotted(b.loss) or "").partition(".")[0] in params for b in own):
        return None
    if called_by_clearing_function(f.ctx, node.name) or may_clear_elsewhere(f, None, s):
        return None
    return own[0]


def covers(f: LoopFacts, z: Named, s: Step) -> bool:
    """Whether ``z.receiver.zero_grad()`` clears what ``s`` steps."""
    if z.receiver == s.optimizer:
        return True
    if not z.receiver or optimizer_like(z.receiver, f.scope, z.stmt.lineno):
        return False
    modules = {m.receiver for m in f.zero_grads if not optimizer_like(m.receiver)}
    if len({st.optimizer for st in f.steps}) == 1 and len(modules) == 1 and \
            z.receiver.rpartition(".")[2] in ("model", "net", "module", "network"):
        return True  # one model, one optimizer
    if _owned_by(f, z, s):  # NOTE [owners from the kinds]
        return True
    made = f"{z.receiver}.parameters("
    for scope in (f.scope, f.ctx.scope(f.ctx.tree)):
        b = scope.binding_before(s.optimizer, s.stmt.lineno)
        if b is not None and b.value is not None:
            return made in f.ctx.code_of(b.value) or through_name(f, scope, b.value, made)
    if s.optimizer.startswith("self."):  # `self.optimiser = Adam(self.online_net.parameters())`
        values = self_assignments(f.ctx.class_def, s.optimizer, f.ctx)
        mades = {made}
        if z.receiver.startswith("self."):  # `self.policy = policy`; `Adam(policy.parameters())`
            held = self_assignments(f.ctx.class_def, z.receiver, f.ctx)
            if len(held) == 1 and isinstance(held[0], ast.Name):
                mades.add(f"{held[0].id}.parameters(")
        if not values and z.receiver.startswith("self."):
            return _unpacked_pair(f, s.optimizer, z.receiver)
        return bool(values) and all(v is not None and any(m in f.ctx.code_of(v) for m in mades)
                                    for v in values)
    return False


def _unpacked_pair(f: LoopFacts, optimizer: str, module: str) -> bool:
    """``self._g_optim`` and ``self._generator`` unpacked from one method's tuple, whose
    ``g_optim`` is built over its ``generator.parameters()``:
    NOTE [fields unpacked from a method's tuple]."""
    from gradtrace.lint.analysis.unpacked_fields import unpacked_names
    got = unpacked_names(f.ctx.class_def, (optimizer, module), f.ctx)
    if got is None:
        return False
    fn, (opt, mod) = got
    bs = f.ctx.scope(fn).bindings.get(opt, ())
    return bool(bs) and all(b.value is not None and f"{mod}.parameters(" in f.ctx.code_of(
        b.value) for b in bs)


def _owned_by(f: LoopFacts, z: Named, s: Step) -> bool:
    """# NOTE [owners from the kinds]
    ``model.zero_grad()`` clears what ``s`` steps when the analysis layer knows the stepped
    optimizer holds the parameters of ``model`` (NOTE [kinds]: its ``over``), wherever it was
    built: an optimizer handed in by every caller (``train(..., d, d_optim)`` with ``d_optim
    = Adam(d.parameters())`` in the script's main block: NOTE [parameter kinds]), returned
    by a helper, built in place. Owners the layer does not know leave the other tests."""
    from gradtrace.lint.analysis.kinds import OPTIMIZER
    from gradtrace.lint.rules.training_loop._loop import _stepped_expr
    e = _stepped_expr(s)
    k = f.ctx.analysis.kind(e, f.scope, s.call.lineno) if e is not None else None
    return k is not None and k.what == OPTIMIZER and z.receiver in k.over


def may_clear_model(f: LoopFacts, z: Named, s: Step) -> bool:
    """``z`` clears a module (not an optimizer) that may hold what ``s`` steps: any module,
    unless the analysis layer knows the optimizer's owners and ``z``'s module is none of them
    nor holds one (``generator.zero_grad()`` does not clear ``d_optim = Adam(D.parameters())``:
    NOTE [owners from the kinds])."""
    if not z.receiver or optimizer_like(z.receiver, f.scope, z.stmt.lineno):
        return False
    from gradtrace.lint.analysis.kinds import OPTIMIZER
    from gradtrace.lint.rules.training_loop._loop import _stepped_expr
    e = _stepped_expr(s)
    k = f.ctx.analysis.kind(e, f.scope, s.call.lineno) if e is not None else None
    if k is None or k.what != OPTIMIZER or not k.over:
        return True
    r = z.receiver
    return any(o == r or o.startswith(r + ".") or r.startswith(o + ".") for o in k.over)
