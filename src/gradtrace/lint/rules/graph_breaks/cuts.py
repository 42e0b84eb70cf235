"""GT105, GT107, GT108: `.data`, `.detach()` and non-differentiable steps on the loss path (GT106,
the `requires_grad` band-aid: :mod:`.band_aid`)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good

from gradtrace.lint.rules.graph_breaks._base import (
    SINK_WORDS, LossCutRule, _file_has, _has_line, worth_reporting, short,
)
from gradtrace.lint.rules.graph_breaks._data_uses import deliberate_data
from gradtrace.lint.rules.graph_breaks._input_data import forward_input_cut, input_cuts
from gradtrace.lint.rules.graph_breaks._method_data import appended_layer_call, fed_to_forward
from gradtrace.lint.rules.graph_breaks._paths import (
    DATA, DETACH, NONDIFF, LossPaths, loss_paths,
)
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.caller_roles import detached_by_callers
from gradtrace.lint.analysis.cuts import objects_of
from gradtrace.lint.analysis.own_optimizer import own_optimizer_leaf
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.graph_breaks._param_data import parameter_data_reads
from gradtrace.lint.rules.graph_breaks._layer_source import (
    _layer_call, _layer_source, _return_deps, returned_assigns)


class DataInLoss(LossCutRule):
    """`.data` reads a tensor without its history in a loss or in what `forward` returns.

    Why: `t.data` is the same storage with no `grad_fn`, invisible to autograd. A loss built
    only from it makes backward raise `RuntimeError: element 0 of tensors does not require
    grad and does not have a grad_fn`; one term built from it adds nothing to the gradient; a
    module whose `forward` returns `out.data` cuts every layer before it from the loss. Use the
    tensor itself (or `.detach()` where a stop-gradient is really meant).
    A Parameter of a `torch.nn` layer of the module read through `.data` in what `forward`
    returns (`att = self.fc.weight.data[query]`, OpenNRE's bag attention) gets no gradient
    through that path, even when the layer is also called live
    (NOTE [layer parameter read through data]).
    A module built in an `nn.Sequential` after a layer with weights whose `forward` passes its
    input through a helper of the file returning it read through `.data` (`inp =
    pad_to_dim(inp, n)`, `return F.pad(tensor.data, ...)`) cuts every layer before it; the
    `.data` in the helper is reported (NOTE [input cut by a helper]).
    Known limits: follows names inside one function; `.data` on another parameter used inside
    `forward` next to live inputs is not reported (see "Not statically decidable"); in what
    `forward` returns, only a `.data` that cuts the output of one of the module's layers
    (`self.encoder(x).data`) is reported, not statistics or tables computed from the inputs
    by functions (batch renormalization's `r`/`d`), nor `PackedSequence.data`, nor a `.data`
    the code shows is deliberate (NOTE [deliberate data]).
    """

    code = "GT105"
    name = "data-in-loss"
    message = "`{expr}` reads `{operand}` without its autograd history: {consequence}"
    triggers = (*SINK_WORDS, ".data")
    file_needs = (".data",)
    cut_kinds = frozenset({DATA})
    examples = [
        Bad("""
            import torch.nn.functional as F

            def train_step(model, opt, x, y):
                logits = model(x)
                loss = F.cross_entropy(logits.data, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(5, 27)),
        Bad("""
            import torch.nn as nn

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 2)

                def forward(self, x):
                    return self.fc(x).data
            """, at=(9, 15)),
        Good("""
            import torch

            def train_step(model, opt, x, y, criterion):
                loss = criterion(model(x), y)
                loss.backward()
                with torch.no_grad():
                    for p in model.parameters():
                        p.data.clamp_(-1, 1)
                print(loss.data)
            """),
        Bad("""
            import torch.nn as nn

            class Net(nn.Module):
                def forward(self, x):
                    h = self.encoder(x).data
                    h = self.act(self.proj(h))
                    return self.head(h)
            """, at=(5, 12)),
        Bad("""
            import torch.nn as nn
            import torch.nn.functional as F

            def pad_to(t, n):
                return F.pad(t.data, (0, n - t.shape[-1]))

            class Padded(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 2)

                def forward(self, x):
                    x = pad_to(x, 8)
                    return self.fc(x)

            model = nn.Sequential(nn.Linear(4, 6), Padded())
            """, at=(5, 17)),
        Good("""
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def forward(self, x):
                    with torch.no_grad():
                        self.scale.data.clamp_(min=1e-3)
                    h = self.encoder(x)
                    stats = h.data.mean()
                    self.running.data.mul_(0.9).add_(0.1 * stats)
                    return self.head(h) * self.scale
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        found = list(self._check(node, ctx))
        yield from found
        if not found and ctx.class_def is None and _file_has(ctx, self.file_needs) \
                and ctx.mentions("Sequential") and _has_line(
                    ctx, ".data", node.lineno, node.end_lineno or node.lineno):
            yield from self._input_helper(node, ctx)  # NOTE [input cut by a helper]
        wide = node.name != "forward" and _file_has(ctx, self.file_needs) and _has_line(
            ctx, ".data", node.lineno, node.end_lineno or node.lineno) and \
            fed_to_forward(ctx, node, _return_deps)  # a method whose result `forward` keeps
        if (wide or node.name == "forward" and worth_reporting(node, ctx)) \
                and _file_has(ctx, self.file_needs):
            seen = {(f.line, f.column) for f in found}
            chain = [f for f in self._forward_chain(node, ctx, wide)
                     if (f.line, f.column) not in seen]
            yield from chain
            if node.name == "forward" and not chain and lp_in_module(ctx, node):
                direct = forward_input_cut(node, ctx)  # NOTE [input cut by a helper]
                if direct is not None and (direct[0].lineno, direct[0].col_offset) not in seen:
                    yield self._input_cut(node, ctx, *direct)
                    return
                yield from self._parameter_data(node, ctx, seen)

    def _input_helper(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        for data, fwd, call, seq in input_cuts(node, ctx):
            cls = ctx.analysis.class_of(fwd)
            name = cls.name if cls is not None else "the module"
            yield self.report(data, ctx, related=(
                Related(ctx.path, call.lineno, f"`{name}.forward` passes its input through "
                        f"`{node.name}` here", ctx.column(call)),
                Related(ctx.path, seq.lineno, f"`{name}` runs after a layer with weights here",
                        ctx.column(seq))), expr=short(ctx.source(data)),
                operand=short(ctx.source(data.value)),
                consequence=f"`{name}.forward` returns what `{node.name}` computes from it, so "
                            f"every layer before `{name}` gets no gradient; use "
                            f"`{ctx.source(data.value)}` itself")
            return

    def _input_cut(self, node: ast.FunctionDef, ctx: Context, data: ast.Attribute,
                   feed: ast.Call) -> Finding:
        cls = ctx.analysis.class_of(node)
        name = cls.name if cls is not None else "the module"
        return self.report(data, ctx, related=(Related(
            ctx.path, feed.lineno, f"`{name}` is given a layer's output here",
            ctx.column(feed)),), expr=short(ctx.source(data)),
            operand=short(ctx.source(data.value)),
            consequence=f"`{name}.forward` returns what it computes from it, so every layer "
                        f"before `{name}` gets no gradient through it; use "
                        f"`{ctx.source(data.value)}` itself")

    def _parameter_data(self, node: ast.FunctionDef, ctx: Context,
                        seen: set[tuple[int, int]]) -> Iterator[Finding]:
        """NOTE [layer parameter read through data]: ``self.fc.weight.data`` in a value
        ``forward`` returns."""
        for n, s, layer in parameter_data_reads(node, ctx):
            f = self.report(n, ctx, related=(Related(
                ctx.path, layer.lineno, f"`{short(ctx.source(n.value), 30)}` is a Parameter of "
                "the layer built here", ctx.column(layer)),), expr=short(ctx.source(n)),
                operand=short(ctx.source(n.value)),
                consequence=f"the Parameter reaches this module's output without history "
                            f"here, so this path gives `{short(ctx.source(n.value), 30)}` no "
                            f"gradient; use it without `.data`")
            if (f.line, f.column) not in seen:
                yield f
                return

    def _forward_chain(self, node: ast.FunctionDef, ctx: Context,
                       wide: bool = False) -> Iterator[Finding]:
        """``h = self.layer(x).data`` in ``forward`` with ``h`` flowing into the return value:
        every layer before the ``.data`` is cut from the gradient of the module's output."""
        lp = loss_paths(ctx, node)
        if not lp._in_module_class():
            return
        scope = lp.scope
        objects = objects_of(scope)
        reported: set[int] = ctx.memo("gt1-reported-" + self.code, ctx.tree, set)
        for s in returned_assigns(scope):
            for n in walk(s.value):
                layer = (_layer_source(n.value, lp) or (appended_layer_call(
                    n.value, lp, _layer_call) if wide else None)) if isinstance(n, ast.Attribute) \
                    and n.attr == "data" and dotted(n.value) not in objects \
                    and not deliberate_data(n, s, scope) else None
                if layer is not None and _cut_before(n.value, s, lp):
                    continue
                if layer is not None and id(n) in reported:
                    break  # said as a cut term of a caller's loss (its loss paths, same code)
                if layer is not None:
                    reported.add(id(n))
                    rel = (Related(ctx.path, layer.lineno, f"`{short(ctx.source(n.value), 30)}` "
                                   f"holds the output of `{short(ctx.source(layer.func), 30)}` "
                                   f"from here", ctx.column(layer)),
                           Related(ctx.path, s.lineno, f"`{s.targets[0].id}` flows into the "
                                   f"value `forward` returns", ctx.column(s)))
                    name = short(ctx.source(layer.func), 30)
                    yield self.report(
                        n, ctx, related=rel, expr=short(ctx.source(n)),
                        operand=short(ctx.source(n.value)),
                        consequence=f"the output of `{name}` it holds reaches this module's "
                                    "output without history, so that layer and every one "
                                    "before it get no gradient through it")
                    break


def lp_in_module(ctx: Context, node: ast.FunctionDef) -> bool:
    """``node`` is the ``forward`` of a module class of the file."""
    info = ctx.analysis.class_of(node)
    return info is not None and info.is_module


def _cut_before(e: ast.expr, s: ast.stmt, lp: LossPaths) -> bool:
    """Whether the value ``e`` holds at ``s`` was already cut on its way there (every binding
    that reaches it built from ``.detach()`` / ``.data`` of what it reads: a similarity of
    ``memory.detach().data``, rebound, then ``(sim.data + 1) * mask``): the ``.data`` at ``s``
    removes no history, whatever layer call another name of its statement holds. A value the
    tracer finds dead without a cut is not enough (a loop-carried state it does not follow)."""
    t = lp.trace(e, s, s.lineno)
    return not t.live and bool(t.cuts)


class DetachedLossTerm(LossCutRule):
    """`.detach()` cuts the only path from the model to the loss (or to one of its terms).

    Why: a detached tensor has no `grad_fn`. When every term of the loss is detached, backward
    raises `RuntimeError: element 0 of tensors does not require grad and does not have a
    grad_fn`; when one additive term is detached (`loss = rec + kl(mu.detach(), ...)`), backward
    runs and that term trains nothing, so the sub-network that produced it gets no gradient
    from it (pytorch-facts.md#partly-cut-graph: the silent case). Detaching a *target* (DQN/TD
    target, EMA
    teacher, `D(fake.detach())` in a GAN discriminator step) is fine and is not reported,
    because the loss keeps a live path through the prediction or the discriminator.
    A call of an object of the file runs the method it names (a module's `forward`, a plain
    class's `__call__`, inherited from a base class of the file included: a metric whose
    base `__call__` detaches both inputs and used as a loss, NOTE [inherited methods]), and
    a method whose result comes from its arguments only passes their cuts on
    (NOTE [pure methods]).
    A sum reduced at the backward (`loss = kld + rec.detach()`, `loss.mean().backward()`) keeps
    its terms (NOTE [a reduction keeps the terms]). A term of a loss module or function of
    the file that reads only an entry the caller detached (`out["x_hat"] =
    out["x_hat"].detach()` before `criterion(out, x)`) and data is cut there too, beside the
    terms the dict keeps live (NOTE [entry cut before the loss]).
    Known limits: follows names inside one function; an argument named like input data
    (`x`, `inputs`, `obs`) that the function feeds to a callee named like a model
    (`self.model(x)`) is the model's input, not a path from it; a detached factor multiplied
    into a live loss is taken as deliberate; `x.detach().requires_grad_()` makes a new input leaf (reference
    gradients, GradCache) and is not a cut; a helper returning a running total
    (`total += loss.detach(); return total`) hands out a value for logging, not a loss; a
    detached argument of a project function whose other calls (in any file) all detach it
    too is that function's reference by the project's convention, not a cut; a leaf of the
    class that an optimizer of its own trains (`Adam([self.eta])`) and another loss reads
    undetached is a dual variable held still on purpose (NOTE [a leaf with its own optimizer]).
    """

    code = "GT107"
    name = "detached-loss-term"
    message = "`{expr}` detaches `{operand}`, the only path from the model here: {consequence}"
    triggers = SINK_WORDS
    file_needs = ("detach",)
    cut_kinds = frozenset({DETACH})
    examples = [
        Bad("""
            import torch.nn.functional as F

            def train_step(model, opt, x, y):
                out = model(x)
                loss = F.mse_loss(out.detach(), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(5, 22)),
        Bad("""
            import torch
            import torch.nn.functional as F

            def vae_step(model, opt, x):
                recon, mu, logvar = model(x)
                rec = F.mse_loss(recon, x)
                mu_d, lv_d = mu.detach(), logvar.detach()
                kl = -0.5 * torch.mean(1 + lv_d - mu_d ** 2 - lv_d.exp())
                loss = rec + kl
                loss.backward()
            """, at=(7, 17), count=1),
        Bad("""
            def train_step(model, x, y):
                out, feats = map(lambda t: t.detach(), (model(x), model[0](x)))
                loss = (out - y).pow(2).mean() + feats.pow(2).mean()
                loss.backward()
            """, at=(2, 17)),
        Good("""
            import torch
            import torch.nn.functional as F

            def dqn_step(q_net, target_net, opt, s, a, r, s2, gamma=0.99):
                q = q_net(s).gather(1, a)
                target = r + gamma * target_net(s2).max(1, keepdim=True)[0].detach()
                loss = F.smooth_l1_loss(q, target)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """),
        Good("""
            import torch.nn.functional as F

            def gan_step(G, D, opt_d, opt_g, z, real, ones, zeros):
                fake = G(z)
                d_loss = F.binary_cross_entropy(D(real), ones) + \\
                    F.binary_cross_entropy(D(fake.detach()), zeros)
                opt_d.zero_grad()
                d_loss.backward()
                opt_d.step()
                g_loss = F.binary_cross_entropy(D(fake), ones)
                opt_g.zero_grad()
                g_loss.backward()
                opt_g.step()
            """),
        Good("""
            import torch.nn.functional as F

            def distill_step(student, teacher, opt, x):
                t = teacher(x).detach()
                s = student(x)
                loss = F.kl_div(F.log_softmax(s, -1), F.softmax(t, -1), reduction="batchmean")
                loss = loss + (s - s.detach()).sum() * 0
                loss.backward()
            """),
        Good("""
            import torch
            def _scalar_loss(out):
                return out.detach() if out.dim() == 0 else None
            """),
    ]

    def finding(self, c, v, lp, ctx):  # type: ignore[no-untyped-def]
        st = lp.scope.statement_of(c.node)  # NOTE [argument roles by the callers]
        if st is not None and detached_by_callers(ctx, st, c.node):
            return None  # the project's other calls detach this argument too: a reference
        if own_optimizer_leaf(ctx, ctx.class_def, c.operand):
            return None  # NOTE [a leaf with its own optimizer]
        return super().finding(c, v, lp, ctx)


class NonDifferentiableLossPath(LossCutRule):
    """`argmax`, comparisons, `round`/`sign`/`floor`, `.long()` or an indicator `torch.where`
    is the only path from the model output to the loss.

    Why: `argmax`, comparison masks, integer casts, `torch.where(cond, 1.0, 0.0)` and counts
    (`torch.histc`, `torch.bucketize`, `torch.searchsorted`) give tensors without history: a loss made only of them makes backward raise
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`.
    `round`, `sign`, `floor` keep a `grad_fn` but their gradient is zero everywhere, so
    backward runs and nothing trains. Compute the loss from the logits/probabilities
    (cross-entropy, a soft/sigmoid relaxation, or a straight-through estimator).
    Known limits: follows names inside one function; a mask that *multiplies* a live loss
    (`(loss * (out > 0).float()).mean()`) is fine and never reported, nor an indicator
    returned in a tuple next to a differentiable value (IRLS `weights, costs`), nor one made
    under `torch.no_grad()` (an accuracy kept as a REINFORCE reward: a constant on purpose).
    """

    code = "GT108"
    name = "non-differentiable-loss-path"
    message = "`{expr}` has no useful gradient with respect to `{operand}`: {consequence}"
    triggers = SINK_WORDS
    file_needs = ("argm", "round", "sign", "floor", "ceil", "trunc", "where", ">", "<", "==",
                  "!=", "long", "int", "bool", "one_hot", "max", "min", "topk", "sort",
                  "heaviside", "histc", "bucketize", "searchsorted")
    cut_kinds = frozenset({NONDIFF})
    examples = [
        Bad("""
            import torch.nn.functional as F

            def train_step(model, opt, x, y):
                logits = model(x)
                pred = logits.argmax(dim=1)
                loss = F.mse_loss(pred.float(), y.float())
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(5, 11)),
        Bad("""
            import torch

            def train_step(model, opt, x, y):
                prob = torch.sigmoid(model(x))
                hard = torch.where(prob > 0.5, 1.0, 0.0)
                loss = (hard - y).abs().mean()
                loss.backward()
            """, at=(5, 23)),
        Good("""
            import torch
            import torch.nn.functional as F

            def train_step(model, opt, x, y):
                logits = model(x)
                loss = F.cross_entropy(logits, y, reduction="none")
                mask = (y != -100).float()
                loss = (loss * mask).sum() / mask.sum()
                loss.backward()
                acc = (logits.argmax(1) == y).float().mean()
                return acc.item()
            """),
    ]

    def finding(self, c, v, lp, ctx):  # type: ignore[no-untyped-def]
        st = lp.scope.statement_of(c.node)
        if st is not None and lp.scope.grad_off_at(st) is not None:
            return None  # computed under `torch.no_grad()`: a constant on purpose (a reward)
        return super().finding(c, v, lp, ctx)
