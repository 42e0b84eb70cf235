"""Per-group learning rates the optimizer was built with, erased before it steps.

# NOTE [group learning rates erased]
``Adam([{'params': backbone, 'lr': lr / 10}, {'params': head}], lr=lr)`` asks for two learning
rates. A helper that then writes one value into every group (``for g in opt.param_groups:
g['lr'] = lr``, PENet's ``adjust_learning_rate``) erases the ratio: the backbone trains ten
times faster than asked, nothing fails. The run reads what was asked while the constructor
runs (``add_param_group`` reads ``param.is_leaf``, a call the tracer sees; the constructor's
``param_groups`` are then still the dicts the program passed) and compares it at the
optimizer's first step: when the asked rates differed between groups and every group now has
one and the same rate, the ratio was erased. A scheduler (which writes ``initial_lr`` into the
groups) keeps each group's base rate and is left out, as is any rate that is not a number.
The line named is the statement that stores into a group's ``'lr'`` in the code that ran (a
``[...]['lr'] = ...`` in a function that reads ``.param_groups``) when there is one such
statement, else where the optimizer was built.
"""
from __future__ import annotations

import dis
import sys
from types import CodeType
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site


def note_asked(data: Any, seq: int) -> None:
    """``param.is_leaf`` read by ``add_param_group`` (the caller checked): the learning rates
    the optimizer's constructor was given, per group."""
    import torch

    f, limit = sys._getframe(2), 16
    while f is not None and limit > 0:
        opt = f.f_locals.get("self") if f.f_code.co_name == "__init__" else None
        if isinstance(opt, torch.optim.Optimizer) and "param_groups" in f.f_locals:
            if id(opt) in data.lr_asked or len(data.lr_asked) >= 256:
                return  # read at its first parameter already (None: nothing asked)
            groups = f.f_locals.get("param_groups")
            asked = None
            if isinstance(groups, list) and len(groups) > 1 and all(
                    isinstance(g, dict) for g in groups):
                default = opt.defaults.get("lr")
                asked = tuple(g.get("lr", default) for g in groups)
                if not all(isinstance(a, (int, float)) for a in asked) or len(set(asked)) < 2:
                    asked = None
            data.lr_asked[id(opt)] = asked
            return
        f, limit = f.f_back, limit - 1


def check_first_step(data: Any, rec: Any, opt: Any) -> None:
    """From the first step pre-hook of ``opt``: were the asked per-group rates erased? Are
    the weight-decay groups inverted (NOTE [decay groups inverted])?"""
    from gradtrace.runtime.trace.decay_groups import note_inverted

    note_inverted(data, rec, opt)
    if not data.lr_asked:
        return
    asked = data.lr_asked.pop(id(opt), None)
    groups = opt.param_groups
    if asked is None or len(groups) != len(asked) or any("initial_lr" in g for g in groups):
        return
    now = tuple(g.get("lr") for g in groups)
    if all(isinstance(n, (int, float)) for n in now) and len(set(now)) == 1:
        data.lr_erased.append((rec, asked, now[0]))


def erased_findings(data: Any) -> list[Finding]:
    """NOTE [group learning rates erased]."""
    from gradtrace.runtime.frames import INTERNAL_FILES
    from gradtrace.runtime.trace.opt_state import built_line

    out = []
    for rec, asked, now in data.lr_erased[:2]:
        stores = lr_stores([c for c, internal in list(INTERNAL_FILES.items()) if not internal])
        built = built_line(data, rec)
        site = stores[0] if len(stores) == 1 else built
        shown = ", ".join(f"{a:g}" for a in asked)
        out.append(make("GT871", site, f"the optimizer was built with a learning rate per "
                        f"parameter group ({shown}), but at its first step every group has lr "
                        f"{now:g}: " + ("this line writes one value into every group, erasing "
                                        "the groups' ratio" if site is not built else
                                        "something wrote one value into every group, erasing "
                                        "the groups' ratio"),
                        fix="scale each group's own rate (keep the ratio: e.g. store a base lr "
                            "per group and write base * factor), or use a scheduler",
                        related=[(built, "the optimizer with per-group rates is built here"),
                                 (rec.site, "it steps here")], severity="warning"))
    return out


def lr_stores(codes: list[CodeType]) -> list[Site]:
    """Statements ``<x>['lr'] = ...`` in functions that also read ``.param_groups``, in the
    user files whose code ran (nested functions of that code included)."""
    from gradtrace.runtime.fuse import is_user_file

    out: list[Site] = []
    seen: set[int] = set()
    stack = [c for c in codes if is_user_file(c.co_filename)]
    while stack and len(seen) < 20_000:
        code = stack.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        stack.extend(k for k in code.co_consts if isinstance(k, CodeType))
        if "param_groups" not in code.co_names or "lr" not in code.co_consts:
            continue
        ins = list(dis.get_instructions(code))
        for a, b in zip(ins, ins[1:]):
            if a.opname == "LOAD_CONST" and a.argval == "lr" and b.opname == "STORE_SUBSCR" \
                    and b.positions is not None and b.positions.lineno:
                site = Site(code.co_filename, b.positions.lineno, code.co_name)
                if site not in out:
                    out.append(site)
    return out
