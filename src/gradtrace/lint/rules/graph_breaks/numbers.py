"""GT101-GT104: a loss that goes through a Python number, NumPy, or a re-built tensor."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import NUMBER, NUMPY
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.cuts import CUT_FUNCS
from gradtrace.lint.analysis.number_lists import holds_numbers
from gradtrace.lint.analysis.self_state import method_rebinds
from gradtrace.lint.analysis.settings import exclusive_settings
from gradtrace.lint.analysis.unpacked_kinds import unpacked_kind
from gradtrace.lint.rules.graph_breaks._numpy_callers import fed_numpy_by_callers
from gradtrace.lint.rules.graph_breaks._base import SINK_WORDS, LossCutRule, related_for, short
from gradtrace.lint.rules.graph_breaks._paths import Cut, LossPaths, Verdict
from gradtrace.lint.rules.graph_breaks._paths import NUMBER as CUT_NUMBER
from gradtrace.lint.rules.graph_breaks._paths import NUMPY as CUT_NUMPY
from gradtrace.lint.rules.graph_breaks._paths import REBUILD


class BackwardOnPythonNumber(Rule):
    """`.backward()` is called on a Python number or NumPy value, not on a tensor.

    Why: `.item()`, `float(t)` and `.tolist()` return plain Python values with no autograd
    history, so they have no `.backward()`: the call raises
    `AttributeError: 'float' object has no attribute 'backward'`
    (pytorch-facts.md#python-number-loss; it is
    never the `'NoneType' object has no attribute 'zero_'` error). The finding is on the line
    where the loss became a number; call `backward()` on the tensor, and use `.item()` only
    for logging.
    A name bound to a call of a function of the file, or unpacked from the tuple it returns
    (`loss, acc = criterion(out, y)` where the criterion's `forward` returns
    `(float(acc), loss)`), is a number when every `return` of that function gives one at
    that place (NOTE [unpacked element kinds]).
    Known limits: follows names within one function; a `self.<attr>` set to a number and then
    written by a method the function calls (`self.loss = 0`, then `self.rollout(...)` adding
    each loss into `self.loss`) is not reported (NOTE [state set by a called method]).
    """

    code = "GT101"
    gate_statements = True
    name = "backward-on-python-number"
    message = "`{expr}` is a Python {what}, not a tensor: {consequence}"
    fix_title = "Call `.backward()` on the tensor itself"
    fix_safety = "safe"
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.item().backward()
            """, fixed="""
            import torch
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            """, at=(3, 0)),
        Bad("""
            import torch.nn.functional as F
            def step(model, x, y, opt):
                float(F.mse_loss(model(x), y)).backward()
            """, fixed="""
            import torch.nn.functional as F
            def step(model, x, y, opt):
                F.mse_loss(model(x), y).backward()
            """, at=(3, 4)),
        Bad("""
            import torch
            def step(model, x, y, opt):
                loss = float(torch.nn.functional.mse_loss(model(x), y))
                opt.zero_grad()
                loss.backward()
            """, at=(3, 4)),
        Good("""
            import torch
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            print(loss.item())
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "backward"):
            return
        recv = func.value
        inner = _number_of(recv, ctx)
        if inner is not None:
            fix = self.fix(ctx.edit(recv, ctx.source(inner)))
            yield self.report(node, ctx, fix=fix, expr=ctx.source(recv), what="float",
                              consequence=f"`.backward()` on it raises {ATTR_FLOAT}")
            return
        scope = ctx.scope()
        kind = scope.kind(recv)
        name = ctx.source(recv)
        b = scope.binding_before(name, node.lineno)
        unpacked = None
        if kind is None and b is not None and isinstance(recv, ast.Name):
            # `loss, sim = criterion(x, y)` with `criterion` returning `(float(...), loss)`
            unpacked = unpacked_kind(ctx, scope, b)  # NOTE [unpacked element kinds]
            kind = unpacked[0] if unpacked is not None else None
        if kind not in (NUMBER, NUMPY):
            return
        what = "number" if kind == NUMBER else "NumPy value"
        stmt = scope.statement_of(node)
        if b is not None and stmt is not None and exclusive_settings(scope, b.stmt, stmt):
            return  # bound so under a setting this backward never runs with (EDAC's alpha)
        if b is not None and name.startswith("self.") and name.count(".") == 1 and \
                method_rebinds(ctx, scope.node, name[5:], b.line, node.lineno) is not None:
            return  # `self.loss = 0`, then `self.rollout()` adds a tensor into it
        if b is None:
            yield self.report(node, ctx, expr=name, what=what,
                              consequence=f"`.backward()` on it raises {_attr_error(None, ctx)}")
            return
        rel = (Related(ctx.path, node.lineno, f"`{short(ctx.source(node))}` is called here",
                       ctx.column(node)),)
        if unpacked is not None:
            fn = unpacked[1]
            said = f"`{fn.name}` returns a {what} at that place"  # type: ignore[attr-defined]
            rel = (Related(ctx.path, fn.lineno, said, ctx.column(fn)),) + rel
        yield self.report(b.stmt, ctx, related=rel, expr=name, what=what,
                          consequence=f"`{name}.backward()` (line {node.lineno}) raises "
                                      f"{_attr_error(b.value, ctx)}")


ATTR_FLOAT = "`AttributeError: 'float' object has no attribute 'backward'`"


def _number_of(e: ast.expr, ctx: Context) -> ast.expr | None:
    """``t`` for ``t.item()`` / ``float(t)``: the tensor a direct conversion was made from."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "item" \
            and not e.args:
        return e.func.value
    if isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords and \
            ctx.qualified_name(e.func) == "float":
        return e.args[0]
    return None


def _attr_error(value: ast.expr | None, ctx: Context) -> str:
    if value is not None and _number_of(value, ctx) is not None:
        return ATTR_FLOAT
    return "`AttributeError: ... object has no attribute 'backward'`"


class PythonNumberInLoss(LossCutRule):
    """`.item()`, `float()` or `.tolist()` turns a differentiable value into a Python number
    that is then used to build the loss.

    Why: a Python number has no autograd history. When the whole loss goes through it (for
    example `loss = torch.tensor(loss.item())`), backward raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`
    (pytorch-facts.md#python-number-loss); after a `requires_grad=True` re-wrap it runs and trains
    nothing. When only one term goes through it (`loss = ce + lam * reg.item()`), that term is
    a constant: training runs and the regulariser never acts. Keep the tensor; use `.item()`
    only to log (`total += loss.item()` is right).
    Known limits: follows names inside one function; a helper's returned term made a number is
    left to its callers unless one backpropagates its value (NOTE [backpropagated across files]);
    a live loss times a number (`w.item() * loss`) is a deliberate scale, not reported.
    """

    code = "GT102"
    name = "python-number-in-loss"
    message = ("`{expr}` turns `{operand}` into a Python number on the way to the loss: "
               "{consequence}")
    triggers = SINK_WORDS
    file_needs = ("item", "float", "tolist", "math.")
    cut_kinds = frozenset({CUT_NUMBER})
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def train_step(model, opt, x, y):
                out = model(x)
                value = F.cross_entropy(out, y).item()
                loss = torch.tensor(value, requires_grad=True)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(6, 12)),
        Bad("""
            import torch.nn.functional as F

            def train_step(model, opt, x, y, lam=0.1):
                out, feats = model(x)
                reg = feats.pow(2).mean().item()
                loss = F.cross_entropy(out, y) + lam * reg
                loss.backward()
            """, at=(5, 10)),
        Good("""
            import torch.nn.functional as F

            def train_epoch(model, opt, loader, logger):
                total = 0.0
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total += loss.item()
                    logger.log({"loss": loss.item(), "lr": float(opt.param_groups[0]["lr"])})
                return total / len(loader)
            """),
        Good("""
            def train_step(model, opt, x, y, criterion):
                loss = criterion(model(x), y)
                scale = 1.0 / max(loss.item(), 1e-8)
                (loss * scale).backward()
            """),
    ]


class NumpyRoundTripInLoss(LossCutRule):
    """Part of a loss goes through NumPy (`.detach().numpy()`, `np.array(t)`) and comes back
    with `torch.tensor` / `torch.from_numpy`.

    Why: NumPy arrays have no autograd history and `torch.from_numpy` / `torch.tensor` make a
    new leaf, so everything before the round trip is cut off: with nothing else in the loss,
    backward raises `RuntimeError: element 0 of tensors does not require grad and does not
    have a grad_fn`; next to other terms it silently adds nothing to the gradient. Write the
    computation with torch operations instead.
    Known limits: follows names inside one function; NumPy work in a helper function that
    returns a tensor is not seen. A `self` list the class fills only with Python numbers
    (`self.record.append(loss.item())`) holds no tensor: NOTE [list of numbers on self].
    """

    code = "GT103"
    name = "numpy-round-trip-in-loss"
    message = "`{expr}` takes `{operand}` through NumPy on the way to the loss: {consequence}"
    triggers = SINK_WORDS
    file_needs = ("numpy", "np.")
    cut_kinds = frozenset({CUT_NUMPY})
    examples = [
        Bad("""
            import numpy as np
            import torch

            def train_step(model, opt, x, y):
                pred = model(x)
                arr = pred.detach().cpu().numpy()
                err = torch.from_numpy(np.abs(arr - y.numpy())).mean()
                opt.zero_grad()
                err.backward()
                opt.step()
            """, at=(6, 10)),
        Bad("""
            import numpy
            import torch.nn.functional as F

            class Trainer:
                def fit_batch(self, batch):
                    preds = self.net(batch["x"])
                    per_head = [F.l1_loss(p, batch["y"]) for p in preds]
                    total = numpy.mean(per_head)
                    total.backward()
                    self.opt.step()
            """, at=(8, 16)),
        Good("""
            import numpy as np
            import torch

            def train_step(model, opt, crit, x, ys, log):
                losses = [crit(o, y) for o, y in zip(model(x), ys)]
                torch.stack(losses).sum().backward()
                opt.step()
                log.append(np.mean([l.item() for l in losses]))
            """),
        Good("""
            import numpy as np
            import torch.nn.functional as F

            def train_step(model, opt, x, y, history):
                pred = model(x)
                loss = F.mse_loss(pred, y)
                loss.backward()
                history.append(np.abs(pred.detach().cpu().numpy() - y.numpy()).mean())
            """),
    ]


    def finding(self, c: Cut, v: Verdict, lp: LossPaths, ctx: Context) -> Finding | None:
        if _returns_the_array(c, v, lp) or _number_list(c.operand, lp, ctx):
            return None  # NOTE [list of numbers on self]
        qual = ctx.qualified_name(c.node.func) if isinstance(c.node, ast.Call) else None
        if qual in NUMPY_READERS:
            return None  # `np.load(path)`: NumPy is handed a file name, never a tensor
        if not qual or not qual.startswith("numpy.") or qual in CUT_FUNCS or _converted(c.node):
            return super().finding(c, v, lp, ctx)  # (`np.abs(t.detach().numpy())` raises not)
        if _fed_numpy(c.operand, lp):
            return None
        if v.sink.how == "return" and isinstance(c.operand, ast.Name) and \
                c.operand.id in lp.params and not lp.scope.bindings.get(c.operand.id):
            return None  # `np.zeros_like(history)` of an argument: what it holds is unknown
        if v.sink.how == "return" and fed_numpy_by_callers(c.operand, lp.scope.node, ctx):
            return None  # NOTE [NumPy helper fed arrays]
        return self.report(c.node, ctx, related=related_for(c, v, ctx),
                           expr=short(ctx.source(c.node)), operand=short(ctx.source(c.operand)),
                           consequence=NUMPY_CALL)


def _fed_numpy(o: ast.expr, lp: LossPaths) -> bool:
    """``out = mine.forward(x.detach().numpy())``: the operand is what a call given NumPy
    arrays returned (a NumPy re-implementation of a layer checked against torch's); a torch
    module cannot take them, so it holds no graph and NumPy reads no tensor."""
    b = lp.scope.binding_before(o.id, o.lineno) if isinstance(o, ast.Name) else None
    v = getattr(b, "value", None)
    return isinstance(v, ast.Call) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "numpy"
        for a in v.args for n in ast.walk(a))


def _number_list(o: ast.expr, lp: LossPaths, ctx: Context) -> bool:
    cls = ctx.analysis.class_of(lp.scope.node)
    return isinstance(o, ast.Attribute) and isinstance(o.value, ast.Name) and o.value.id == \
        "self" and cls is not None and holds_numbers(cls.node, o.attr)


def _converted(call: ast.AST) -> bool:
    """``np.abs(t.detach().numpy() - x)``: the arguments convert the tensor themselves, so
    NumPy is handed no tensor that requires grad (the round trip cuts, nothing raises)."""
    return isinstance(call, ast.Call) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("numpy", "detach", "tolist", "item")
        or isinstance(n, ast.Attribute) and n.attr == "data"
        for a in call.args for n in ast.walk(a))


def _returns_the_array(c: Cut, v: Verdict, lp: LossPaths) -> bool:
    """The function returns the NumPy value itself (``return t.detach().numpy()``, or a name
    bound to it): nothing comes back into torch, the caller gets an array with no
    ``backward`` (a score, a per-token loss for display), not a loss cut from its graph. So
    does ``return np.array(preds), loss`` where ``loss`` does not read the cut: the array of
    predictions comes first, then the loss (BLiTZ's ``sample_elbo_detailed_loss``)."""
    if v.sink.how != "return" or not isinstance(c.node, ast.Call):
        return False
    e = v.sink.value
    if v.sink.others and _numpy_made(e, lp) and not any(
            _reads_cut(o, c, v, lp) for o in v.sink.others):
        return True
    if isinstance(e, ast.Name):
        if not v.sink.others and _array_name(e.id, lp):
            return True
        b = lp.scope.binding_before(e.id, v.sink.node.lineno)  # type: ignore[attr-defined]
        e = b.value if b is not None and b.value is not None else e
    if not v.sink.others and e is not c.node and isinstance(e, ast.Call) and \
            (lp.ctx.qualified_name(e.func) or "") in NUMPY_MAKERS:
        return True  # `return np.array([loss])` of the NumPy values (ART's `compute_loss`)
    return e is c.node and isinstance(c.node.func, ast.Attribute) and \
        c.node.func.attr in ("numpy", "tolist")


def _array_name(name: str, lp: LossPaths) -> bool:
    """Every binding of ``name`` in the function makes a NumPy value (``losses =
    loss.detach().numpy()`` in each arm) or updates one in place (``losses += ...``, ``losses
    /= n``: an array stays an array): the caller gets an array (scholar's ``get_losses``)."""
    bs = lp.scope.bindings.get(name, ())
    return any(isinstance(b.stmt, ast.Assign) for b in bs) and all(
        isinstance(b.stmt, ast.AugAssign) or isinstance(b.stmt, ast.Assign)
        and _numpy_made(b.value, lp) for b in bs)


NUMPY_READERS = frozenset({"numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile",
                           "numpy.memmap", "numpy.lib.format.open_memmap"})
NUMPY_MAKERS = frozenset({"numpy.array", "numpy.asarray", "numpy.stack", "numpy.concatenate"})


def _numpy_made(e: ast.expr, lp: LossPaths) -> bool:
    """``np.array(y_hat)``, ``t.numpy()``, ``t.tolist()``: a value no caller backpropagates."""
    if not isinstance(e, ast.Call):
        return False
    if (lp.ctx.qualified_name(e.func) or "").startswith("numpy."):
        return True
    return isinstance(e.func, ast.Attribute) and e.func.attr in ("numpy", "tolist")


def _reads_cut(o: ast.expr, c: Cut, v: Verdict, lp: LossPaths) -> bool:
    """Whether the returned element ``o`` reads (through the function's bindings) the value
    the cut ``c`` makes."""
    from gradtrace.lint.analysis.graph_deps import graphs
    st = lp.scope.statement_of(c.node)
    if st is None or any(n is c.node for n in ast.walk(o)):
        return True
    deps = graphs(lp.scope).deps(o, v.sink.node.lineno)  # type: ignore[attr-defined]
    return any(b.stmt is st for b in deps.bindings)


# what `np.<function>` does with tensors that require grad (checked on torch 2.13)
NUMPY_CALL = ("NumPy reads each tensor through `.numpy()`, which raises `RuntimeError: Can't "
              "call numpy() on Tensor that requires grad` (a reduction of one tensor, "
              "`np.sum(t)`, raises a TypeError instead); use the torch operation "
              "(`torch.stack(losses).sum()`, `sum(losses)`, `torch.exp(t)`)")


class TensorRebuiltFromGraph(LossCutRule):
    """`torch.tensor(t)`, `torch.tensor([t1, t2])` or `torch.Tensor([...])` copies tensors that
    are on the graph into a new tensor that is then part of the loss.

    Why: `torch.tensor(...)` always builds a new leaf with `requires_grad=False`: it copies
    the values (PyTorch warns "To copy construct from a tensor, it is recommended to use
    sourceTensor.detach().clone()"; a list of one-element tensors is read as Python scalars,
    with "Converting a tensor with requires_grad=True to a scalar may lead to unexpected
    behavior"; a list of larger tensors raises `ValueError: only one element tensors can be
    converted to Python scalars`), so the gradient stops there. `torch.autograd.Variable(t)`
    also returns a new leaf. With nothing else in the loss, backward raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`
    (pytorch-facts.md#python-number-loss). Use `torch.stack(list)` / `torch.cat(list)` or the
    tensor itself.
    `torch.as_tensor` returns a tensor given as is, but copies a list or tuple of them
    (`torch.as_tensor(losses)`: lululxvi/deepxde#1379, checked on torch 2.13).
    A copy of a list of graph values is reported also where the loss stays live: added to a
    live value (`pos / (pos + neg)` with `neg = torch.tensor([dist(f, k) for k in negs]).sum()`,
    the negatives never push) or held by the loss on one path of an `if`
    (NOTE [rebuilt beside a live value]); a copy that only scales the loss is a weight and is
    not.
    A copy in a statement under `torch.no_grad()` is not reported: grad mode already made that
    value a constant (NOTE [copied under no_grad]).
    Known limits: follows names inside one function; tensors built from Python data (targets,
    constants) are fine and never reported.
    """

    code = "GT104"
    name = "tensor-rebuilt-from-graph"
    message = "`{expr}` copies `{operand}` into a new tensor without history: {consequence}"
    triggers = SINK_WORDS
    file_needs = ("tensor", "Tensor")
    cut_kinds = frozenset({REBUILD})
    examples = [
        Bad("""
            import torch

            def train_step(model, opt, batches):
                losses = [model(x, y) for x, y in batches]
                loss = torch.tensor(losses).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(5, 11)),
        Bad("""
            import torch

            def train_step(model, opt, batches):
                losses = [model(x, y) for x, y in batches]
                loss = torch.as_tensor(losses).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(5, 11)),
        Good("""
            import torch

            def train_step(model, opt, batches):
                losses = [model(x, y) for x, y in batches]
                loss = torch.stack(losses).mean()
                weights = torch.tensor([0.5, 2.0])
                target = torch.tensor([1.0, 0.0])
                (loss + ((weights - target) ** 2).sum()).backward()
            """),
    ]

    def finding(self, c: Cut, v: Verdict, lp: LossPaths, ctx: Context) -> Finding | None:
        if lp.scope.grad_off_at(c.node) is not None:
            return None  # NOTE [copied under no_grad]
        return super().finding(c, v, lp, ctx)


# NOTE [copied under no_grad]
# A copy made in a statement under `torch.no_grad()` (a TD target: `torch.tensor([b[2] for b in
# batch]) + gamma * q_next.max(1).values`) has no history whatever it copies: grad mode already
# took it off the graph, on purpose (a target), so the copy changes nothing to say.
