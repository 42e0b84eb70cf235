"""What an accumulated value holds, for GT505 (:class:`accumulate.LossAccumulatedWithGraph`): one
update's micro-batches, a term of the backpropagated loss, a result of another file's function
or handed back by a call that runs no model, and the names the losses read or are scaled from."""
from __future__ import annotations

import ast
from typing import Callable

from gradtrace.lint.analysis.graph_deps import Graphs, loads
from gradtrace.lint.analysis.kinds import LOADER
from gradtrace.lint.analysis.vocabulary import DATA_ITER_RE
from gradtrace.lint.analysis.returned_terms import returned_term
from gradtrace.lint.analysis.model_calls import model_calls, runs_model
from gradtrace.lint.analysis.reach import called_function, reaching, value_of
from gradtrace.lint.flow import Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._loop import LoopFacts


def _one_update(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """``acc`` is made anew on each pass of a loop around ``loop``, and that pass steps an
    optimizer after ``loop`` and none inside it (the micro-batches of one update, backwarded
    one by one): it holds one update's graph nodes, freed at the next pass. So when the pass
    steps an optimizer outside ``loop`` at all (VocGAN: the generator's step, then
    ``for _ in range(rep_discriminator)`` the critic's, summed in ``loss_d_sum`` made anew
    each iteration): each pass is one training iteration, the inner loop repeats a sub-step
    of it, and what ``acc`` keeps is bounded by that inner loop."""
    outer = f.loops_of(loop)
    if not outer:
        return _per_learner(f, acc, loop) or _per_call(f, acc, loop) \
            or _per_forward(f, acc, loop) or _one_window(f, acc, loop) \
            or _same_batch(f, acc, loop) \
            or _parts_of_one_batch(f, acc, loop)
    # (NOTE [same batch each pass], NOTE [parts of one batch])
    around = outer[-1]
    made = any(f.inside(b.stmt, around) and not f.inside(b.stmt, loop) and b.line < loop.lineno
               and not isinstance(b.stmt, ast.AugAssign) for b in f.scope.bindings.get(acc, ()))
    steps = [s for s in f.steps if f.inside(s.stmt, around)]
    return made and any(not f.inside(s.stmt, loop) for s in steps)


def _per_call(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """A function that is one update: a local ``acc`` made before ``loop``, an optimizer
    stepped after it and none inside it (deep-daze's ``train_step``: ``total_loss = 0``, ``for
    _ in range(self.gradient_accumulate_every)`` backwarding each micro-batch, then
    ``self.scaler.step(self.optimizer)``): ``acc`` holds one update's graph nodes, made anew by
    the next call (a caller summing what it returns is GT505's own case, on the caller)."""
    if not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in acc:
        return False
    made = [b for b in f.scope.bindings.get(acc, ()) if not f.inside(b.stmt, loop)]
    return bool(made) and all(b.line < loop.lineno and not isinstance(b.stmt, ast.AugAssign)
                              for b in made) and bool(f.steps) and all(
        not f.inside(s.stmt, loop) and s.stmt.lineno > (loop.end_lineno or loop.lineno)
        for s in f.steps)


def _per_forward(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """A module's ``forward`` that steps no optimizer: a local ``acc`` made before ``loop``
    sums what one call computes (recurrent-memory-transformer's memory-replay forward:
    ``total_loss = 0.``, then per segment ``weighted_loss.backward(retain_graph=True)`` and
    ``total_loss += weighted_loss``, returned): one batch's graphs, made anew by the next
    call, as ``sum(losses)`` would be (a caller summing the returns is GT505's own case)."""
    fn = f.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != "forward" \
            or "." in acc or f.steps:
        return False
    info = f.ctx.analysis.class_of(fn)
    made = [b for b in f.scope.bindings.get(acc, ()) if not f.inside(b.stmt, loop)]
    return info is not None and info.is_module and bool(made) and all(
        b.line < loop.lineno and not isinstance(b.stmt, ast.AugAssign) for b in made)


def _same_batch(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """# NOTE [same batch each pass]
    A function that steps no optimizer, a local ``acc`` made before ``loop``, and every model
    run of the loop takes only names bound outside it: each pass runs the model on the same
    batch, the loop's variable configuring it (slimmable networks: ``for w in widths:
    self.model.apply(set_width(w)); loss_w = crit(self.model(images), masks);
    loss_w.backward(); total_loss += loss_w``, returned): one batch's graphs, each
    backwarded, made anew by the next call (a caller summing the returns is GT505's own
    case, on the caller)."""
    if not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in acc \
            or f.steps or not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    made = [b for b in f.scope.bindings.get(acc, ()) if not f.inside(b.stmt, loop)]
    if not made or any(b.line > loop.lineno or isinstance(b.stmt, ast.AugAssign) for b in made):
        return False
    inner = {n.id for n in walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    runs = [c for st in loop.body for callee, c in model_calls(st)
            if runs_model(f.ctx, f.scope, callee, c.lineno)]
    return bool(runs) and not any(
        isinstance(n, ast.Name) and n.id in inner
        for c in runs for a in (*c.args, *(k.value for k in c.keywords)) for n in walk(a))


def _parts_of_one_batch(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """# NOTE [parts of one batch]
    A function that steps no optimizer, a local ``acc`` made before ``loop``, and a loop over
    the parts of one value the function is handed: the tasks of a meta-batch (torchmeta's
    ``get_outer_loss``/``get_loss``: ``mean_loss = torch.tensor(0.)``, ``for task in
    zip(*batch['train'], *batch['test'])``, each task's loss backwarded, ``mean_loss +=
    loss``, returned; the caller steps once per batch). What ``acc`` keeps is the graphs of the
    tasks of one batch, a fixed number, freed when the caller drops the return (a caller
    summing the returns is GT505's own case, on the caller). The iterable, through
    ``zip``/``enumerate`` and stars, subscripts and attributes, reads only parameters of the
    function, none of them named like a loader (``for x in loader`` in a function stepping
    elsewhere is an epoch, not a batch)."""
    fn = f.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in acc or f.steps \
            or not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    made = [b for b in f.scope.bindings.get(acc, ()) if not f.inside(b.stmt, loop)]
    if not made or any(b.line > loop.lineno or isinstance(b.stmt, ast.AugAssign) for b in made):
        return False
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)} - {"self"}
    parts, todo = [], [loop.iter]
    while todo:
        e = todo.pop()
        if isinstance(e, ast.Call) and dotted(e.func) in ("zip", "enumerate") and e.args \
                and not e.keywords:
            todo += e.args
        elif isinstance(e, (ast.Starred, ast.Subscript, ast.Attribute)):
            todo.append(e.value)
        else:
            parts.append(e)
    return bool(parts) and all(
        isinstance(p, ast.Name) and p.id in params and not f.scope.bindings.get(p.id)
        and not DATA_ITER_RE.search(p.id) and not _loader_kind(f, p) for p in parts)


def _loader_kind(f: LoopFacts, e: ast.expr) -> bool:
    k = f.ctx.analysis.kind(e, f.scope, e.lineno)
    return k is not None and k.what == LOADER


# NOTE [one accumulation window]
# A loop whose passes are counted by the same ``n`` its body steps (or scales) the gradients
# at (``for i, mb in enumerate(micro_batches(batch, n))`` with ``if (i + 1) % n == 0:``) is one
# update's micro-batches, not a run of steps: a sum made before it keeps ``n`` graphs, a
# fixed number, and the function's return frees them (GT505 is about memory without bound).
def _one_window(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """A function's loop over one accumulation window (NOTE [one accumulation window]): its
    iterable is ``range(n)`` or a call given ``n`` (through ``enumerate``), and its body
    consumes the gradients under ``if ... % n == 0``: the loop runs ``n`` micro-batches, one
    update's worth, and a local ``acc`` made before it holds their graph nodes only, freed
    when the function returns (torchtune's micro-batch loop, reduced to one update)."""
    if not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in acc \
            or not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    made = [b for b in f.scope.bindings.get(acc, ()) if not f.inside(b.stmt, loop)]
    if not made or not all(b.line < loop.lineno and not isinstance(b.stmt, ast.AugAssign)
                           for b in made):
        return False
    it = loop.iter
    while isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and it.args:
        it = it.args[0]
    if not isinstance(it, ast.Call):
        return False
    counts = {a.id for a in [*it.args, *(k.value for k in it.keywords)]
              if isinstance(a, ast.Name)}
    return any(isinstance(n, ast.If) and any(
        isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod) and isinstance(m.right, ast.Name)
        and m.right.id in counts for m in ast.walk(n.test)) for s in loop.body for n in ast.walk(s))


def _per_learner(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """A function's loop whose every step steps an optimizer the loop's variable picks
    (``for agent in range(self.n_agents): ... self.critic_optimizer[agent].step()``, ``for a
    in self.agents: a.opt.step()``): each pass updates another learner once, so the loop is
    one training iteration over the learners, not a run of steps; a local ``acc`` made in the
    function before it holds that iteration's graphs, which the next call makes anew
    (MADDPG's ``update_policy`` returns its per-agent losses)."""
    if not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in acc \
            or not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    var = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    # the steps the analysis knows, and ``opts[i].step()`` (a receiver it does not spell)
    steps = [s.call.func for s in f.steps if f.inside(s.stmt, loop)] + [
        n.func for n in ast.walk(loop) if isinstance(n, ast.Call) and not n.args
        and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
        and isinstance(n.func.value, ast.Subscript)]
    made = [b for b in f.scope.bindings.get(acc, ()) if not f.inside(b.stmt, loop)]
    return bool(var and steps and made) and all(
        b.line < loop.lineno and not isinstance(b.stmt, ast.AugAssign) for b in made) and all(
        isinstance(s, ast.Attribute) and any(
            isinstance(n, ast.Name) and n.id in var for n in ast.walk(s.value)) for s in steps)


def _loss_term(f: LoopFacts, b: Binding, losses: set[str]) -> bool:
    """``loss, loss_chords = compute_loss(data)`` then ``loss.backward()``: ``b`` is unpacked
    from the same call of a function of this file as a backpropagated loss, and that function
    computes the loss from it (a term of the loss; NOTE [helper results])."""
    s = b.stmt
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Tuple) and isinstance(s.value, ast.Call)):
        return False
    names = [dotted(e) for e in s.targets[0].elts]
    whole = next((i for i, n in enumerate(names) if n in losses and n != b.name), None)
    if whole is None or b.name not in names:
        return False
    fn = called_function(s.value, f.scope, b.line)
    return fn is not None and returned_term(f.ctx, fn, whole, names.index(b.name), len(names))


def _foreign_result(b: Binding, foreign: Callable[[ast.Call], bool]) -> bool:
    """``hits = accuracy(y, out)``: the binding is the result of a function of another file
    (NOTE [foreign functions]), whether it keeps a graph is not known here."""
    v = value_of(b)
    return isinstance(v, ast.Call) and foreign(v)


def _passed_through_clean(f: LoopFacts, g: Graphs, b: Binding) -> bool:
    """``out, sample = processor.postprocess(out, sample)``: a call that runs no model, whose
    positional arguments are the unpacked names in order, hands each argument back
    transformed (to a device, unnormalised): ``sample`` holds a graph only if what was passed
    as ``sample`` did, whatever ``out`` holds (the FNO repository's residual loop collects
    ``sample["x"]``)."""
    s = b.stmt
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Tuple) and isinstance(s.value, ast.Call)):
        return False
    call, names = s.value, [dotted(e) for e in s.targets[0].elts]
    if call.keywords or len(names) < 2 or [dotted(a) if isinstance(a, ast.Name) else None
                                           for a in call.args] != names \
            or any(runs_model(f.ctx, f.scope, c, s.lineno) for c, _ in model_calls(call)):
        return False
    return not any(g.carries(d) for d in reaching(f.scope, b.name, s.lineno, prefix=True)
                   if d is not b)


def _differentiated(f: LoopFacts, g: Graphs, deps: bool = True) -> set[str]:
    """The names the losses of the function's backward calls read (with ``deps``: and the
    bindings they are computed from), once per function: a script with a hundred training
    loops asked it for every accumulation and every backward, a square of the file's size."""
    def make() -> set[str]:
        out: set[str] = set()
        for b in f.backwards:
            if b.loss is not None:
                out.update(n for n, _ in loads(b.loss))
                if deps:
                    out.update(d.name for d in g.deps(b.loss, b.stmt.lineno).bindings)
                elif isinstance(b.loss, ast.Name):
                    out.update(_scaled_from(f, b.loss.id, b.stmt.lineno))
        return out
    return f.ctx.memo("gt505-differentiated" if deps else "gt505-losses", f.node, make)


def _scaled_from(f: LoopFacts, name: str, line: int) -> list[str]:
    """The names the loss ``name`` is that same loss scaled from: ``loss = batch_loss /
    n_token`` (or ``* w``, ``/ accum``), a step or two back: summing ``batch_loss`` keeps the
    same graph as summing ``loss``."""
    out: list[str] = []
    for _ in range(2):
        b = f.scope.binding_before(name, line)
        v = b.value if b is not None else None
        if not (isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Div, ast.Mult))):
            break
        names = [e.id for e in (v.left, v.right) if isinstance(e, ast.Name)]
        if isinstance(v.op, ast.Div):
            names = names[:1] if isinstance(v.left, ast.Name) else []
        if len(names) != 1 or names[0] == name:
            break
        name, line = names[0], b.line  # type: ignore[union-attr]
        out.append(name)
    return out
