"""Turn what one test step did into per-parameter verdicts, findings and one readable message."""
from __future__ import annotations

import fnmatch
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import nn

from gradtrace.findings import Finding, Related
from gradtrace.guards._locate import display_path
from gradtrace.testing._usage import Usage, Where

LOG = logging.getLogger(__name__)
Tensor = torch.Tensor
_ITEMISH = ("`.item()`", "`.tolist()`", "`float()`", "`int()`", "an index conversion",
            "`.numpy()`", "numpy")
_NO_PATH = ("no gradient path from the loss reaches it: its result is not part of the loss "
            "that backward() was called on (or reaches it only through a non-differentiable "
            "op such as argmax, round or a comparison)")
_ZERO = ("the gradient is exactly 0 in all {n} elements: it is connected to the loss, but the "
         "loss does not change with it for this input (for example a ReLU inactive for every "
         "input, a multiplication by zero or an all-zero mask, or a softmax over a dimension "
         "of size 1)")
_CODES = {"none": "GT820", "zero": "GT820", "nonfinite": "GT825", "no-optimizer": "GT821"}


@dataclass(frozen=True)
class ParamProblem:
    """One parameter that fails the check: ``kind`` is none / zero / nonfinite / no-optimizer."""

    name: str
    kind: str
    reason: str
    where: Where | None = None
    code: str = ""  # the static rule's code when one describes the cause (GT107 for .detach())


@dataclass(frozen=True)
class FlowResult:
    """The outcome of ``assert_gradients_flow`` (returned when it passes).

    ``flowing``: parameters with a usable gradient; ``allowed``: without one but allowed;
    ``frozen``: requires_grad=False, not checked; ``problems`` / ``findings``: the failures.
    """

    flowing: tuple[str, ...]
    allowed: tuple[str, ...]
    frozen: tuple[str, ...]
    problems: tuple[ParamProblem, ...]
    findings: tuple[Finding, ...]


def match_name(name: str, pats: Sequence[str]) -> bool:
    """``name`` equals a pattern, lies below it as a module prefix, or matches it as a glob."""
    return any(name == p or name.startswith(p + ".") or fnmatch.fnmatchcase(name, p)
               for p in pats)


def analyze(model: nn.Module, trainable: dict[str, Tensor], frozen: tuple[str, ...],
            usage: Usage, tracer: Any, none_pats: Sequence[str], zero_pats: Sequence[str],
            check_finite: bool, opts: list[Any]) -> FlowResult:
    """Verdicts for every trainable parameter (call before the ``.grad`` are restored)."""
    problems: list[ParamProblem] = []
    flowing: list[str] = []
    allowed: list[str] = []
    for name, p in trainable.items():
        g = p.grad if p.grad is not None else usage.agrad.get(id(p))
        if g is None:
            if match_name(name, none_pats):
                allowed.append(name)
            else:
                problems.append(why_none(name, p, usage, tracer))
            continue
        bad = _grad_problem(name, g, check_finite)
        if bad is None:
            flowing.append(name)
        elif bad.kind == "zero" and match_name(name, zero_pats):
            allowed.append(name)
        else:
            problems.append(bad)
    problems += _no_optimizer(trainable, usage, opts)
    findings = tuple(_finding(model, pr) for pr in problems)
    return FlowResult(tuple(flowing), tuple(allowed), frozen, tuple(problems), findings)


def _grad_problem(name: str, g: Tensor, check_finite: bool) -> ParamProblem | None:
    vals = g.coalesce()._values() if g.is_sparse else g
    n = vals.numel()
    if vals.is_floating_point() or vals.is_complex():
        nan, inf, nonzero = torch.stack([torch.isnan(vals).sum(), torch.isinf(vals).sum(),
                                         torch.count_nonzero(vals)]).tolist()
    else:
        nan, inf, nonzero = 0, 0, int(torch.count_nonzero(vals))
    if check_finite and (nan or inf):
        what = " and ".join(s for s in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "")
                            if s)
        return ParamProblem(name, "nonfinite", f"the gradient has {what} of {n} elements")
    if nonzero == 0:
        return ParamProblem(name, "zero", _ZERO.format(n=n))
    return None


def why_none(name: str, p: Tensor, usage: Usage, tracer: Any) -> ParamProblem:
    """Why ``p`` got no gradient, as precisely as the step's record allows."""
    pid = id(p)
    if pid in usage.frozen:
        w = usage.frozen[pid]
        return ParamProblem(name, "none", f"grad is None: the step froze it (requires_grad set "
                            f"to False at {w})", w)
    use = usage.uses.get(pid)
    if use is None and pid not in usage.cuts:
        if pid in usage.data_reads:
            w = usage.data_reads[pid]
            return ParamProblem(name, "none", f"grad is None: it is only read through `.data` "
                                f"(at {w}), which bypasses autograd; use the parameter itself "
                                "(see GT105)", w, "GT105")
        return ParamProblem(name, "none", "grad is None: not used in the forward pass (no torch "
                            "operation read it during the step)")
    if use is None:  # only seen upstream of a cut (used through an op we do not see)
        cut, where, code = cut_reason(p, usage, tracer)
        return ParamProblem(name, "none", f"grad is None: {cut}", where, code)
    if use.grad_on == 0 and use.grad_off == 0 and use.in_function:
        owner = use.in_function.rsplit(".", 1)[0]
        return ParamProblem(name, "none", f"grad is None: it is only used inside the custom "
                            f"autograd.Function `{use.in_function}` (at {use.off_at}), so its "
                            f"gradient is what `{owner}.backward` returns for that input: it "
                            "returned None (or that Function's output does not reach the loss)",
                            use.off_at)
    if use.grad_on == 0 and use.off_inside == "torch.utils.checkpoint":
        return ParamProblem(name, "none", "grad is None: only used inside torch.utils.checkpoint "
                            f"(called at {use.off_at}) with use_reentrant=True, which runs the "
                            "forward under no_grad; its output has a graph only if one of the "
                            "checkpointed *inputs* requires grad, and none does here: pass "
                            "use_reentrant=False", use.off_at)
    if use.grad_on == 0:
        sw = use.off_switch
        code = "GT204" if use.off_inference else "GT201"
        text = f"grad is None: only used with grad mode off (at {use.off_at})"
        if sw is not None:
            text += f"; grad mode was turned off by {sw.describe()}"
            where = Where(display_path(sw.path), sw.line, sw.text)
            return ParamProblem(name, "none", text, where, code)
        return ParamProblem(name, "none", text, use.off_at, code)
    cut, where, code = cut_reason(p, usage, tracer)
    if cut:
        seen = f" (it is first used at {use.first})" if use.first and use.first != where else ""
        return ParamProblem(name, "none", f"grad is None: {cut}{seen}", where, code)
    first = f"used in forward (first at {use.first})" if use.first else "used in forward"
    return ParamProblem(name, "none", f"grad is None: {first}, but {_NO_PATH}", use.first)


def cut_reason(p: Tensor, usage: Usage, tracer: Any) -> tuple[str, Where | None, str]:
    """``(text, where, code)``: "a value computed from it left the graph at file:line via
    .detach()", or ``("", None, "")`` when no cut is known."""
    cuts = usage.cuts.get(id(p), [])
    strong = [c for c in cuts if c[1] not in _ITEMISH]
    if strong:
        where, op = strong[0]
        code = _static_code(op)
        return f"a value computed from it left the graph at {where} via {op}{_see(op)}", where, \
            code if code != "GT102" else ""
    traced = _traced_cut(p, tracer)
    if traced[0]:
        return traced
    if cuts:
        where, op = cuts[0]
        return f"a value computed from it left the graph at {where} via {op}{_see(op)}", where, ""
    return "", None, ""


def _static_code(op: str) -> str:
    """The static rule that flags this kind of cut in source ('' if none)."""
    code = {"`.detach()`": "GT107", "`.detach_()`": "GT107", "`.data`": "GT105"}.get(op, "")
    return "GT102" if not code and op in _ITEMISH else code


def _see(op: str) -> str:
    code = _static_code(op)
    return f" (see {code})" if code else ""


def _traced_cut(p: Tensor, tracer: Any) -> tuple[str, Where | None, str]:
    """The runtime tracer's 'graph cut at file:line' for ``p``, if it recorded one."""
    if tracer is None or not hasattr(tracer, "why_no_grad"):
        return "", None, ""
    try:
        f = tracer.why_no_grad(p)
    except Exception:  # the tracer's answer is a bonus
        LOG.debug("gradtrace: tracer.why_no_grad failed", exc_info=True)
        return "", None, ""
    if f is None or f.path.startswith("<") or "cut" not in f.message:
        return "", None, ""
    import linecache

    where = Where(display_path(f.path), f.line, linecache.getline(f.path, f.line).strip())
    at = f.message.find("cut here")
    how = f.message[at + len("cut here"):].lstrip(",: ") if at >= 0 else ""
    return f"the graph was cut at {where}" + (f": {how}" if how else ""), where, f.code


def _no_optimizer(trainable: dict[str, Tensor], usage: Usage,
                  opts: list[Any]) -> list[ParamProblem]:
    if not opts:
        return []
    held = [q for o in opts for g in o.param_groups for q in g["params"]]
    ids = {id(q) for q in held}
    missing = [n for n, p in trainable.items()
               if (p.grad is not None or id(p) in usage.agrad) and id(p) not in ids]
    if not missing:
        return []
    why = "it gets a gradient but is in no optimizer's param_groups, so it is never updated"
    code = ""
    if not any(id(p) in ids for p in trainable.values()):
        shapes = sorted(tuple(q.shape) for q in held)
        if shapes and shapes == sorted(tuple(p.shape) for p in trainable.values()):
            why += (" (the optimizer holds other tensors of exactly these shapes: was the model "
                    "re-created, deep-copied or loaded with assign=True after the optimizer "
                    "was built?)")
            code = "GT404"
    return [ParamProblem(n, "no-optimizer", why, None, code) for n in missing]


def _class_site(model: nn.Module) -> tuple[str, int]:
    try:
        path = inspect.getsourcefile(type(model)) or "<unknown>"
        line = inspect.getsourcelines(type(model))[1]
    except (OSError, TypeError):
        return "<unknown>", 1
    return display_path(path), line


def _finding(model: nn.Module, pr: ParamProblem) -> Finding:
    from gradtrace.codes import name_of

    code = pr.code or _CODES[pr.kind]
    kind = name_of(code)
    path, line = (pr.where.path, pr.where.line) if pr.where else _class_site(model)
    related = ()
    if pr.where is not None:
        cpath, cline = _class_site(model)
        related = (Related(cpath, cline, f"{type(model).__name__} is defined here"),)
    return Finding(code=code, name=kind, message=f"{pr.name}: {pr.reason}", path=path,
                   line=line, related=related, source="runtime")


def message(model: nn.Module, trainable: dict[str, Tensor], result: FlowResult) -> str:
    """The AssertionError text: grouped by identical reason, every parameter named."""
    flow = [pr for pr in result.problems if pr.kind != "no-optimizer"]
    noopt = [pr for pr in result.problems if pr.kind == "no-optimizer"]
    lines: list[str] = []
    if flow:
        lines.append(f"gradients do not flow to {len({p.name for p in flow})} of "
                     f"{len(trainable)} trainable parameters of {type(model).__name__}:")
        lines += _grouped(flow)
    if noopt:
        lines.append(f"{len(noopt)} parameter(s) of {type(model).__name__} get gradients but "
                     "no optimizer updates them:")
        lines += _grouped(noopt)
    if result.allowed:
        lines.append("allowed without a usable gradient: " + ", ".join(result.allowed))
    if result.frozen:
        lines.append("frozen (requires_grad=False), not checked: " + ", ".join(result.frozen))
    return "\n".join(lines)


def _grouped(problems: list[ParamProblem]) -> list[str]:
    groups: dict[tuple[str, str], list[str]] = {}
    for pr in problems:
        groups.setdefault((pr.kind, pr.reason), []).append(pr.name)
    return [f"  - {', '.join(names)}: {reason}" for (_, reason), names in groups.items()]


def render_findings(findings: Sequence[Finding]) -> str:
    """The runtime's text rendering of ``findings``."""
    from gradtrace.runtime.render import render_text

    return render_text(findings).rstrip("\n")
