"""GT505: a loss (or output) accumulated across loop passes keeps every pass's graph alive."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding, Fix
from gradtrace.lint.context import Context
from gradtrace.lint.flow import LEAF
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.analysis.dict_entries import entries_rewritten
from gradtrace.lint.analysis.fixed_loops import over_written_list
from gradtrace.lint.analysis.accumulators import accumulated_args, calls_accumulator
from gradtrace.lint.analysis.model_calls import model_calls
from gradtrace.lint.analysis.method_freezes import graph_call
from gradtrace.lint.analysis.graphless_returns import graphless_call
from gradtrace.lint.analysis.unpacked_graphless import unpacked_graphless
from gradtrace.lint.analysis.caller_grad import callers_grad_off
from gradtrace.lint.analysis.collected_leaves import no_graph_collected
from gradtrace.lint.analysis.step_forwards import step_forward
from gradtrace.lint.analysis.reach import (
    decorated_off, disables_grad, fed_to_model, in_switched_off, reaching, value_of)
from gradtrace.lint.analysis.graph_deps import Graphs, graphs, loads
from gradtrace.lint.rules.training_loop._foreign import foreign_call, other_framework
from gradtrace.lint.rules.training_loop._step_keeps import step_keeps
from gradtrace.lint.rules.training_loop._unroll import unrolled
from gradtrace.lint.rules.training_loop._after_loop import ctx_names, only_formatted, read_as_numpy
from gradtrace.lint.rules.training_loop._returned_keeps import calls_returner, handed_back, term_kept
from gradtrace.lint.rules.training_loop._loop import LoopFacts, facts
from gradtrace.lint.rules.training_loop._base import LoopRule, function_text, related_at
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._accumulated_values import (
    _differentiated, _foreign_result, _loss_term, _one_update, _passed_through_clean)

LOADER_RE = re.compile(r"^(?:\w+_)?(?:loader|dataloader|dataset|ds)$|^batches$|loader$",
                       re.IGNORECASE)
EVAL_LOOP_RE = re.compile(r"for\b[^\n]*\bin\b[^\n]*(?:loader|dataset|batches\b)", re.IGNORECASE)
NO_GRAD_HOOKS = re.compile(r"^(validation|test|predict)_step$|^on_(validation|test|predict)"
                           r"|_epoch_end$", re.IGNORECASE)


def _accumulations(f: LoopFacts) -> Iterator[tuple[ast.stmt, str, ast.expr]]:
    """(statement, accumulator, added value) for ``acc += v``, ``acc = acc + v``,
    ``acc.append(v)``."""
    for s in f.scope.stmts:
        if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add):
            acc = _base(s.target)
            if acc:
                yield s, acc, s.value
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.BinOp) \
                and isinstance(s.value.op, ast.Add):
            acc = dotted(s.targets[0])
            if acc and dotted(s.value.left) == acc:
                yield s, acc, s.value.right
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "append" \
                and len(s.value.args) == 1:
            acc = _base(s.value.func.value)
            if acc:
                yield s, acc, s.value.args[0]
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):  # `meter.update(loss)`
            for acc, arg in accumulated_args(f.ctx, s.value, f.scope):
                yield s, acc, arg


def _base(target: ast.expr) -> str | None:
    """``history`` for ``history["loss"]`` / ``history["loss"][i]``; the dotted name otherwise."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return dotted(target)


def _loader_like(it: ast.expr) -> bool:
    """``val_loader``, ``enumerate(tqdm(self.test_dataloader))``, ``batches``: a data loader."""
    while isinstance(it, ast.Call) and it.args and dotted(it.func) in (
            "enumerate", "tqdm", "tqdm.tqdm", "zip", "iter", "progress_bar", "track"):
        it = it.args[0]
    name = dotted(it)
    return name is not None and bool(LOADER_RE.search(name.rpartition(".")[2]))


def _made_per_batch(f: LoopFacts, acc: str, loops: tuple[ast.stmt, ...]) -> bool:
    """The innermost loop does not walk the data (``for i in range(num_students)``) and
    ``acc`` is bound anew (not added to) on each pass of an enclosing loop over a data loader,
    outside that inner loop (KD_Lib's DML: ``avg_student_loss = 0`` per batch, summed over
    the students): what it keeps is one batch's graphs, never more."""
    inner = loops[-1] if loops else None
    if not isinstance(inner, (ast.For, ast.AsyncFor)) or _loader_like(inner.iter):
        return False
    for outer in reversed(loops[:-1]):
        if isinstance(outer, (ast.For, ast.AsyncFor)) and _loader_like(outer.iter):
            return any(f.inside(b.stmt, outer) and not f.inside(b.stmt, inner)
                       and not isinstance(b.stmt, ast.AugAssign)
                       for b in f.scope.bindings.get(acc, ()))
    return False


def _in_module_class(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` is a method of an ``nn.Module`` subclass (model code: its outputs need graphs)."""
    for node in walk(ctx.tree):
        if isinstance(node, ast.ClassDef) and fn in node.body:
            return any((ctx.qualified_name(b) or "").endswith(("Module", "Mixin", "Model"))
                       for b in node.bases)
    return False


def _no_grad_callers(ctx: Context) -> set[str]:
    """Names of functions called somewhere under ``no_grad``/``inference_mode`` in this file,
    and of the functions such a function of the file calls in turn (a helper of a
    ``@torch.no_grad()`` visualisation runs with grad off too), three levels deep."""
    def key() -> set[str]:
        out = _direct()
        defs = {n.name: n for n in walk(ctx.tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        plain = _own_calls(ctx.tree) if defs else set()
        grown = {d for d in out if d in defs and d in plain}
        for _ in range(3):
            more = {name for d in grown for name in _own_calls(defs[d])
                    if name in defs and name not in out}
            if not more:
                break
            out |= more
            grown = more
        return out

    def _direct() -> set[str]:
        out: set[str] = set()
        for node in walk(ctx.tree):
            off = False
            if isinstance(node, (ast.With, ast.AsyncWith)):
                off = any(disables_grad(it.context_expr, ctx, maybe=True) for it in node.items)
            else:
                off = decorated_off(node, ctx)
            if off:
                for sub in walk(node):
                    if isinstance(sub, ast.Call):
                        name = dotted(sub.func)
                        if name:
                            out.add(name.rpartition(".")[2])
        return out
    return ctx.memo("gt5-no-grad-callers", ctx.tree, key)


def _own_calls(node: ast.AST) -> set[str]:
    """Names of the calls in ``node`` of a function of the file: ``helper(...)``,
    ``self.helper(...)`` (not a method of another object: ``model.train()``)."""
    out: set[str] = set()
    for sub in walk(node):
        if isinstance(sub, ast.Call):
            name = dotted(sub.func) or ""
            if name.count(".") == 0 or name.count(".") == 1 and name.startswith("self."):
                out.add(name.rpartition(".")[2])
    return out


class LossAccumulatedWithGraph(LoopRule):
    """A loss tensor is summed or collected across loop passes with its autograd graph.

    Why: `total_loss += loss` (or `losses.append(loss)`) keeps a reference to each pass's
    graph, so nothing of it is ever freed: in a training loop that calls `backward()` memory
    grows slowly and without bound (pytorch-facts.md#loss-accumulation); in an
    evaluation loop with grad enabled and no `backward()`, every step's saved activations stay
    alive (+403 MB per 100 steps) until out-of-memory. Accumulate `loss.item()` (a Python
    float) or `loss.detach()`.
    Fix safety: `total += loss.item()` turns the accumulator into a Python float. The fix is
    marked safe only when the accumulator starts as a tensor or is later only printed or logged;
    otherwise (e.g. it is returned, or `.item()` is called on it) it is unsafe.
    Known limits: an accumulator that is reset inside the loop (e.g. every 100 steps) is not
    reported: what it keeps is bounded; nor is one made anew for each optimizer step that
    collects that step's micro-batches (the step follows the inner loop), or the sub-steps
    of one training iteration (an outer pass that also steps outside the inner loop: a GAN's
    generator step, then `rep_discriminator` critic steps summed). An evaluation function
    every call of which (here or in another file: NOTE [grad off by the callers]) runs with
    grad off, a loop in `with utils.eval_mode(net, no_grad=True):` (a grad-off switch), a
    Lightning validation hook is not, nor a loop over a hand-written list of samples (a
    display, a function returning one, torch's `DataLoader` over it:
    NOTE [hand-written collections]): it keeps a fixed number of graphs. Values count as
    carrying a graph when they come from a call of something bound to an `nn.Module` in this
    file or spelled like one (`model`, `encoder`, `netG`, `self.rnn`), or from a function of
    the file whose every `return` gives one back (`loss, loss_kl = compute_loss(batch)`). In a training loop only the backpropagated
    loss (or its scaled form) is reported, and a term of it that the same call of a function of
    the file hands back with it (`loss_chords` when `compute_loss` returns `loss_chords +
    loss_kl, loss_chords`). Outside any loop, a method that runs `backward()` and `step()` is
    taken as one training step: a list on `self` it appends the backpropagated loss to is
    reported (DQN's `self.cost_his.append(loss)`). Across a call: a function of the file that
    backpropagates a loss and returns it, summed or collected by the loop calling it, is
    reported on its `return` (NOTE [backpropagated loss handed back]); terms of that loss
    it hands back (a criterion's dict of them) summed by the caller, on the sum
    (NOTE [loss terms handed back]).
    """

    code = "GT505"
    gate_statements = True
    name = "loss-accumulated-with-graph"
    message = ("`{acc}` outlives the {span} and collects `{expr}` with its autograd graph on "
               "every {unit}: {why}; accumulate `{fixed}` instead")
    fix_title = "Accumulate a Python number (`.item()`) or a detached tensor"
    fix_safety = "unsafe"
    fix_safety_varies = True  # safe when provably so (see "Fix safety" above)
    triggers = (".backward(", "manual_backward(", "loader", "dataset", "batches")

    def _entry(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        text = function_text(ctx, node)
        if self.wants(text) or ".backward(" in text and calls_accumulator(ctx, text) \
                or ("+=" in text or "append(" in text or " + " in text) \
                and calls_returner(ctx, text):
            yield from self.check(facts(ctx, node), ctx)

    def wants(self, text: str) -> bool:
        if not ("+=" in text or "append(" in text or " + " in text):
            return False
        if ".backward(" in text or "manual_backward(" in text:
            return True
        if "for " not in text or not ("loader" in text or "dataset" in text or
                                      "batches" in text):
            return False
        return any("for " in ln and EVAL_LOOP_RE.search(ln) for ln in text.splitlines())
    examples = [
        Bad("""
            total_loss = 0
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total_loss += loss
            print(f"epoch loss {total_loss / len(loader):.3f}")
            """, fixed="""
            total_loss = 0
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total_loss += loss.item()
            print(f"epoch loss {total_loss / len(loader):.3f}")
            """, at=(7, 4)),
        Bad("""
            def evaluate(model, val_loader, criterion):
                model.eval()
                losses = []
                for x, y in val_loader:
                    losses.append(criterion(model(x), y))
                return sum(losses) / len(losses)
            """, fixed="""
            def evaluate(model, val_loader, criterion):
                model.eval()
                losses = []
                for x, y in val_loader:
                    losses.append(criterion(model(x), y).detach())
                return sum(losses) / len(losses)
            """, at=(5, 8)),
        Bad("""
            def train_batch(model, opt, x, y):
                opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                return loss

            running = 0.0
            for x, y in loader:
                running += train_batch(model, opt, x, y)
            """, at=(6, 4)),
        Good("""
            total_loss = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                total_loss += loss.item()
            """),
        Good("""
            for x, y in loader:
                loss = 0
                for head in heads:
                    loss += criterion(head(model(x)), y)
                loss.backward()
            """),
        Good("""
            @torch.no_grad()
            def evaluate(model, val_loader):
                losses = []
                for x, y in val_loader:
                    losses.append(criterion(model(x), y))
                return torch.stack(losses).mean()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        g = graphs(f.scope)
        for s, acc, value in _accumulations(f):
            loops = f.loops_of(s)
            if not loops:
                if step_keeps(f, g, s, acc, value):
                    yield self._finding(f, ctx, s, acc, value, (
                        "this method is one training step (it runs `backward()` and `step()`), "
                        "so every call adds a graph that nothing frees, and memory grows with "
                        "every step"))
                continue
            loop = loops[-1]
            back = handed_back(f, s, value, loop) if f.scope.grad_off_at(s) is None \
                and self._outlives(f, acc, loop) and acc not in _differentiated(f, g) else None
            if back is not None:  # NOTE [backpropagated loss handed back]
                seen: set[int] = ctx.memo("gt505-handed", ctx.tree, set)
                if id(back[0]) not in seen:  # one finding per `return`, whatever the callers
                    seen.add(id(back[0]))
                    yield self._handed(f, ctx, s, acc, *back)
                continue
            why = self._why(f, g, s, acc, value, loop)
            if why is None:
                continue
            yield self._finding(f, ctx, s, acc, value, why)

    def _why(self, f: LoopFacts, g: Graphs, s: ast.stmt, acc: str, value: ast.expr,
             loop: ast.stmt) -> str | None:
        """Why the accumulation keeps graphs (None: it does not, or we cannot tell)."""
        if f.scope.grad_off_at(s) is not None:
            return None  # added under no_grad: the sum records no graph
        if not self._outlives(f, acc, loop) or acc in _differentiated(f, g):
            return None  # the collected values are differentiated later: graphs are needed
        if _made_per_batch(f, acc, f.loops_of(s)):
            return None  # made anew for every batch, summed over a loop that is not the data's
        if isinstance(value, ast.Call) and graphless_call(f.ctx, f.node, value):
            return None  # a Python number, or no graph (NOTE [graphless by construction])
        if _numpy_result(f.ctx, value) or no_graph_collected(f.ctx, f.scope, f.node, s, value):
            return None  # arrays, fresh leaves (NOTE [fresh leaves collected]): no graph kept
        foreign = foreign_call(f.ctx)  # NOTE [foreign functions]: their results are unknown
        graphy = [b for n, _ in loads(value, g._cut, foreign)
                  for b in reaching(f.scope, n, s.lineno, prefix=True)
                  if f.inside(b.stmt, loop)
                  and g.carries(b) and not _foreign_result(b, foreign)
                  and not (isinstance(v := value_of(b), ast.Call)
                           and other_framework(f.ctx, f.scope, v))
                  and not _passed_through_clean(f, g, b)
                  and not entries_rewritten(f.node, b.name, b.line, s)
                  and not unpacked_graphless(f.ctx, f.scope, b)]
        direct = any(graph_call(f.ctx, f.scope, c, s.lineno) for c, _ in model_calls(value))
        if not graphy and not direct and (at := term_kept(f, s, value)) is not None \
                and self._outlives(f, acc, f.loops_of(at)[-1]):
            return ("the step hands back terms of the loss it backpropagated, with their graph, "
                    "so the graph nodes of every step stay reachable and memory grows with "
                    "every step, without bound")  # NOTE [loss terms handed back]
        if not graphy and not direct:
            return None
        if any(b.accumulates and f.inside(b.stmt, loop) for b in f.backwards):
            losses = _differentiated(f, g, deps=False)
            if direct or not any(b.name in losses or _loss_term(f, b, losses) for b in graphy) \
                    or _one_update(f, acc, loop) or unrolled(f, g, acc, loop):
                return None
            return ("the graph nodes of every step stay reachable, so memory grows with every "
                    "step, without bound")
        return self._eval_why(f, s, loop, acc)

    @staticmethod
    def _outlives(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
        # a binding in the loop lies on its lines, one before it on an earlier line: both
        # found by line (a binary search), not by a scan of every binding of the name (a
        # script binds `losses` once per experiment, and asked this of each of its loops)
        inner = [b for b in f.scope.bindings_within(acc, loop.lineno, loop.end_lineno
                                                    or 10 ** 9) if f.inside(b.stmt, loop)]
        if acc.startswith("self.") and not inner:
            return True  # state of the object: it outlives the function
        for b in inner:
            if not isinstance(b.stmt, ast.AugAssign) \
                    and dotted(getattr(getattr(b.stmt, "value", None), "left", None)) != acc:
                return False  # reset inside the loop: the graphs kept are bounded
        return bool(f.scope.bindings_within(acc, 0, loop.lineno - 1)) or "." not in acc \
            and not f.scope.bindings.get(acc) \
            and acc in {a.arg for a in getattr(getattr(f.node, "args", None), "args", ())}

    def _eval_why(self, f: LoopFacts, s: ast.stmt, loop: ast.stmt, acc: str) -> str | None:
        ctx = f.ctx
        if any(f.inside(b.stmt, loop) for b in f.backwards) or f.scope.grad_off_at(s) is not None \
                or not isinstance(loop, (ast.For, ast.AsyncFor)) or not _loader_like(loop.iter):
            return None
        fn = f.node
        if ctx.mentions("set_grad_enabled") or not isinstance(fn, ast.Module) and (
                NO_GRAD_HOOKS.search(fn.name)  # type: ignore[attr-defined]
                or fn.name in _no_grad_callers(ctx)  # type: ignore[attr-defined]
                or _in_module_class(ctx, fn) or callers_grad_off(ctx, fn)) \
                or read_as_numpy(f, acc, loop) or step_forward(ctx, fn) \
                or in_switched_off(f, loop, ctx) or fed_to_model(f, acc, loop, ctx) \
                or over_written_list(ctx, f.scope, loop.iter, loop.lineno):
            return None  # (the last: NOTE [hand-written collections])
        if _trains_in_helper(f, loop):  # `loss, aux = self.update_fn(batch)`: backward there
            return ("the graph nodes of every step stay reachable, so memory grows with every "
                    "step, without bound")
        return ("with grad enabled and no `backward()`, every step's saved activations stay "
                "in memory, so memory grows with every batch until out-of-memory")

    def _finding(self, f: LoopFacts, ctx: Context, s: ast.stmt, acc: str, value: ast.expr,
                 why: str) -> Finding:
        src = ctx.source(value)
        atom = isinstance(value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        base = src if atom else f"({src})"
        if isinstance(s, ast.Expr):
            fixed, safety = f"{base}.detach()", "safe"
        else:
            fixed, safety = f"{base}.item()", self._item_safety(f, acc, s)
        fix = Fix(self.fix_title or "", safety, (ctx.edit(value, fixed),))  # type: ignore[arg-type]
        related = [related_at(ctx, value, "the value with its graph")]
        name = dotted(value)
        b = f.scope.binding_before(name, s.lineno) if name else None
        if b is not None:
            related = [related_at(ctx, b.stmt, f"`{name}` is computed here, with its graph")]
        loops = f.loops_of(s)
        first = f.scope.binding_before(acc, loops[-1].lineno) if loops else None
        if first is not None:
            related.append(related_at(ctx, first.stmt, f"`{acc}` is created here, outside the loop"))
            outer = f.loops_of(first.stmt)
            if isinstance(first.stmt, ast.Assign) and outer and any(
                    lp is outer[-1] for lp in loops) and why.endswith(", without bound"):
                # made anew on each pass of an outer loop (an epoch's `losses = 0.0`): the
                # graphs are kept until then, not for ever
                why = why[:-len(", without bound")] + (
                    f" until `{acc}` is made anew (line {first.line}) on the outer loop's next pass")
        return self.report(s, ctx, fix=fix, expr=src, acc=acc, why=why, fixed=fixed,
                           related=related, span="loop" if loops else "call",
                           unit="pass" if loops else "call")

    def _handed(self, f: LoopFacts, ctx: Context, s: ast.stmt, acc: str, ret: ast.Return,
                fn: ast.AST) -> Finding:
        v = ret.value
        loss = ctx.source(v if not isinstance(v, ast.Dict) else next(  # type: ignore[arg-type]
            e for k, e in zip(v.keys, v.values) if isinstance(k, ast.Constant) and k.value == "loss"))
        return self.report(ret, ctx, expr=loss, acc=acc, span="loop", unit="pass", why=(
            f"`{fn.name}` returns `{loss}` after its backward, graph and all, "  # type: ignore
            "and the graph nodes of every step stay reachable, so memory grows with every "
            "step, without bound"), fixed=f"{loss}.detach()", related=[
                related_at(ctx, s, f"`{acc}` collects the returned loss here, on every pass")])

    @staticmethod
    def _item_safety(f: LoopFacts, acc: str, s: ast.stmt) -> str:
        loops = f.loops_of(s)
        b = f.scope.binding_before(acc, loops[0].lineno) if loops else None
        if b is not None and b.kind == LEAF:
            return "safe"  # a tensor accumulator stays a tensor
        for stmt in f.scope.stmts:
            if stmt.lineno <= s.lineno or acc not in ctx_names(stmt):
                continue
            if not only_formatted(stmt, acc):
                return "unsafe"
        return "safe"


def _numpy_result(ctx: Context, value: ast.expr) -> bool:
    """``-np.max(scores, 1)``: the value is what a NumPy function returns (an array, or a
    NumPy scalar), whatever it reads; a tensor that requires grad makes NumPy raise, it is
    never handed back with its graph (energy_ood's ODIN scores)."""
    while isinstance(value, ast.UnaryOp):
        value = value.operand
    return isinstance(value, ast.Call) and (
        ctx.qualified_name(value.func) or "").startswith("numpy.")


def _trains_in_helper(f: LoopFacts, loop: ast.stmt) -> bool:
    """The loop calls a function or method of the file that runs ``backward()`` itself (a
    trainer's ``update_fn``): the loop trains, its saved activations are freed each step."""
    from gradtrace.lint.analysis.steps import step_calls
    for n in walk(loop):
        if isinstance(n, ast.Call):
            fn = f.ctx.analysis.callee(n, f.node)
            if fn is not None and fn is not f.node and step_calls(f.ctx, fn).losses():
                return True
    return False
