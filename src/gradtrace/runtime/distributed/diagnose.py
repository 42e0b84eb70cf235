"""The facts behind a DistributedDataParallel or collective error on one rank.

Messages (verified on torch 2.13, CPU/gloo, 2 processes):

- ``Expected to have finished reduction in the prior iteration before starting a new one.``
  raised by the *next* forward of the DDP module, with ``Parameter indices which did not
  receive grad for rank R: 4 5`` (and ``Parameters which did not receive grad for rank R:
  aux.bias, aux.weight`` with TORCH_DISTRIBUTED_DEBUG=INFO).
- ``Expected to mark a variable ready only once.`` raised inside backward, with ``Parameter at
  index 1 with name a.bias has been marked as ready twice``.
- gloo: ``Timed out waiting 8000ms for recv operation to complete`` (a peer never joined the
  collective) and ``Connection closed by peer`` (a peer exited or crashed).

The facts are plain JSON values so that rank 0 can merge them (:mod:`gradtrace.runtime.distributed.merge`).
"""
from __future__ import annotations

import ast
import re
from typing import Any

from gradtrace.runtime.distributed.freeze_site import constructor_end
from gradtrace.runtime.frames import Site

UNUSED_RE = re.compile(r"Expected to have finished reduction in the prior iteration before "
                       r"starting a new one")
INDICES_RE = re.compile(r"Parameter indices which did not receive grad for rank (\d+):\s*"
                        r"([\d ]+)")
NAMES_RE = re.compile(r"Parameters which did not receive grad for rank (\d+):\s*([^\n]+)")
TWICE_RE = re.compile(r"Expected to mark a variable ready only once")
TWICE_PARAM_RE = re.compile(r"Parameter at index (\d+)(?: with name ([\w.]+))? has been "
                            r"marked as ready twice")
TIMEOUT_RE = re.compile(r"Timed out waiting (\d+)ms for (\w+) operation|Watchdog caught "
                        r"collective operation timeout|timed out after \d+ ?m?s", re.I)
PEER_RE = re.compile(r"Connection closed by peer|Connection reset by peer|remote worker "
                     r"crashing|NCCL communicator was aborted", re.I)


def error_kind(text: str) -> str:
    """``unused`` | ``ready-twice`` | ``timeout`` | ``peer-closed`` | ``''``."""
    if UNUSED_RE.search(text):
        return "unused"
    if TWICE_RE.search(text):
        return "ready-twice"
    if TIMEOUT_RE.search(text):
        return "timeout"
    if PEER_RE.search(text):
        return "peer-closed"
    return ""


def facts_for_error(session: Any, exc: BaseException) -> dict[str, Any]:
    """What this rank knows about ``exc`` (``{}`` if it is not a DDP/collective error)."""
    text = str(exc)
    kind = error_kind(text)
    if not kind:
        return {}
    site = _user_site(exc)
    facts: dict[str, Any] = {"kind": kind, "error": _first_line(text),
                             "site": _site_list(site), "iteration": session.progress.iteration}
    ddp = _find_ddp(session, exc)
    if ddp is not None:
        facts["static_graph"] = bool(getattr(ddp, "static_graph", False))
        facts["find_unused"] = bool(getattr(ddp, "find_unused_parameters", False))
    if kind == "unused" and ddp is not None:
        facts["iteration"] = max(1, session.progress.iteration - 1)
        runs = session.progress.prev_runs
        facts["params"] = [_why_unused(session, ddp, n, p, runs) for n, p in
                           _unused_params(ddp, text, session.tracer.state)]
        facts["used"] = _used_sites(session, ddp, runs)
        facts["built"] = _site_list(_wrapped_at(session, ddp) or _built_at(exc, ddp))
        facts["default"] = _site_list(_flag_default(session, ddp))  # NOTE [flag left at its default]
    elif kind == "ready-twice" and ddp is not None:
        facts["params"] = _twice_params(session, ddp, text)
    elif kind in ("timeout", "peer-closed") and ddp is not None:
        # what ran in this rank's current iteration: a peer that failed on parameters unused
        # in the same iteration shows a branch taken only on some ranks (distributed.merge)
        facts["used"] = _used_sites(session, ddp, session.progress.runs)
    return facts


# -- finding the DDP module and its reducer's parameter order ----------------------------------
def _find_ddp(session: Any, exc: BaseException) -> Any:
    from torch.nn.parallel import DistributedDataParallel as DDP

    tb = exc.__traceback__
    while tb is not None:
        cand = tb.tb_frame.f_locals.get("self")
        if isinstance(cand, DDP):
            return cand
        tb = tb.tb_next
    ddp = session.ddp()
    if ddp is not None:
        return ddp
    for rec in list(session.tracer.hooks.data.modules.values()):
        m = rec.ref()
        if isinstance(m, DDP):
            return m
    return None


def _wrapped_at(session: Any, ddp: Any) -> Site | None:
    """# NOTE [wrapper built here]
    The line that called ``DistributedDataParallel(...)`` for ``ddp``, as the global
    registration hook saw it register the wrapped module (``self.module = module`` in DDP's
    ``__init__``): the call a missing ``find_unused_parameters=True`` belongs to, also when a
    helper builds the wrapper and returns it (``Gen, Dis = prepare_parallel_training(...)``:
    the assignment the traceback shows is the helper's call, not the construction)."""
    from gradtrace.runtime.trace.layer_sites import built_site

    hooks = getattr(getattr(session, "tracer", None), "hooks", None)
    return built_site(getattr(getattr(hooks, "data", None), "built", None), ddp)


def _flag_default(session: Any, ddp: Any) -> Site | None:
    from gradtrace.runtime.trace.flag_default import flag_default_of

    hooks = getattr(getattr(session, "tracer", None), "hooks", None)
    return flag_default_of(getattr(getattr(hooks, "data", None), "built", None), ddp)


def _built_at(exc: BaseException, ddp: Any) -> Site | None:
    """Where ``ddp`` was built: the assignment, before the failing line, of the name that holds
    it in a user frame of the traceback (``model = DDP(Net())``)."""
    from gradtrace.runtime.frames import is_internal
    from gradtrace.runtime.trace.diagnose_args import assignment_before

    tb, found = exc.__traceback__, None
    while tb is not None:
        frame, code = tb.tb_frame, tb.tb_frame.f_code
        if not is_internal(code) and not code.co_filename.startswith("<"):
            for name, value in list(frame.f_locals.items()):
                if value is ddp and name != "self":
                    node = assignment_before(Site(code.co_filename, tb.tb_lineno,
                                                  code.co_name), name)
                    if node is not None and isinstance(node.value, ast.Call):
                        found = Site(code.co_filename, node.lineno, code.co_name)
        tb = tb.tb_next
    return found


def reducer_params(ddp: Any, state: Any = None) -> list[tuple[str, Any]]:
    """(name, parameter) in the order DDP's reducer indexes them (``_build_params_for_reducer``).

    The reducer kept the parameters that required grad when DDP was built. If fewer require
    grad now, the ones frozen while tracing (``state``) are counted back in when that restores
    the reducer's size (``num_parameter_tensors`` of DDP's logging data).
    """
    ignore = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    every: list[tuple[str, Any]] = []
    seen: set[int] = set()
    for mname, mod in ddp.module.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if f"{mname}.{pname}" in ignore or id(p) in seen:
                continue
            seen.add(id(p))
            every.append((f"{mname}.{pname}" if mname else pname, p))
    current = [(n, p) for n, p in every if p.requires_grad]
    size = _reducer_size(ddp)
    if state is None or size is None or size == len(current):
        return current
    widened = [(n, p) for n, p in every if p.requires_grad or state.frozen_at(p) is not None]
    return widened if len(widened) == size else current


def _reducer_size(ddp: Any) -> int | None:
    try:
        return int(ddp._get_ddp_logging_data()["num_parameter_tensors"])
    except Exception:  # private API: absent or changed in this torch version
        return None


def _unused_params(ddp: Any, text: str, state: Any = None) -> list[tuple[str, Any]]:
    params = reducer_params(ddp, state)
    by_name = dict(params)
    m = NAMES_RE.search(text)
    if m:
        names = [n.strip() for n in m.group(2).split(",") if n.strip()]
        hits = [(n, by_name[n]) for n in names if n in by_name]
        if hits:
            return hits
    m = INDICES_RE.search(text)
    if not m:
        return []
    idx = [int(i) for i in m.group(2).split()]
    return [params[i] for i in idx if 0 <= i < len(params)]


# -- why a parameter got no gradient in that iteration ---------------------------------------
def _owner(ddp: Any, name: str) -> tuple[str, Any]:
    mname = name.rpartition(".")[0]
    try:
        return mname, ddp.module.get_submodule(mname) if mname else ddp.module
    except AttributeError:
        return mname, None


def _why_unused(session: Any, ddp: Any, name: str, p: Any, runs: dict[int, int]) -> dict[str, Any]:
    data, state = session.tracer.hooks.data, session.tracer.state
    mname, mod = _owner(ddp, name)
    rec = data.modules.get(id(mod)) if mod is not None else None
    rec = rec if rec is not None and rec.ref() is mod else None
    tracked = session.info.distributed
    ran = runs.get(id(mod), 0) > 0 if tracked else bool(rec and rec.grad_runs)
    out: dict[str, Any] = {"name": name, "module": mname}
    if not p.requires_grad:
        at = state.frozen_at(p)  # NOTE [freeze applied by a train() override]
        end = constructor_end(at)
        if end is not None and at is not None:
            return {**out, "why": "frozen-by-train-override", "site": _site_list(end),
                    "detail": f"it is frozen (line {at.line}) only by the module's `train()`"}
        return {**out, "why": "frozen-after-wrap", "site": _site_list(at)}
    if not ran:
        if rec is not None and rec.grad_runs == 0 and rec.nograd_runs > 0:
            return {**out, "why": "no-grad", "site": _site_list(rec.nograd_site or rec.site)}
        from gradtrace.runtime.trace.silent import defined_at

        before = bool(rec and rec.grad_runs) and tracked
        from gradtrace.runtime.distributed.branch_site import unrun_branch_site

        site = defined_at(data, p) or unrun_branch_site(ddp.module, name, lambda m: (
            runs.get(id(m), 0) > 0 if tracked else bool(_rec_of(data, m).grad_runs)))
        return {**out, "why": "not-run-this-iteration" if before else "not-run",
                "site": _site_list(site),
                "call": _site_list(rec.site if rec is not None else None)}
    from gradtrace.runtime.trace.silent import cuts_upstream_of

    cuts = cuts_upstream_of(state, p, rec)
    if cuts:
        return {**out, "why": "cut", "site": _site_list(cuts[0].site),
                "detail": cuts[0].describe(), "call": _site_list(rec.site if rec else None)}
    leaf = mod is not None and not any(True for _ in mod.children()) and mod is not ddp.module
    return {**out, "why": "output-unused" if leaf else "param-unused",
            "site": _site_list(rec.site if rec is not None else None)}


def _rec_of(data: Any, m: Any) -> Any:
    rec = data.modules.get(id(m))
    return rec if rec is not None and rec.ref() is m else _NO_RUNS


class _NO_RUNS:  # a module no hook recorded: it never ran
    grad_runs = 0


def _used_sites(session: Any, ddp: Any, runs: dict[int, int]) -> dict[str, Any]:
    """module name -> where it was called, for the modules (with parameters) that ran."""
    data = session.tracer.hooks.data
    out: dict[str, Any] = {}
    for mname, mod in ddp.module.named_modules():
        if len(out) >= 400 or not any(True for _ in mod.parameters(recurse=False)):
            continue
        rec = data.modules.get(id(mod))
        ran = runs.get(id(mod), 0) > 0 if session.info.distributed else bool(
            rec is not None and rec.grad_runs)
        if ran:
            out[mname] = _site_list(rec.site if rec is not None and rec.ref() is mod else None)
    return out


def _twice_params(session: Any, ddp: Any, text: str) -> list[dict[str, Any]]:
    m = TWICE_PARAM_RE.search(text)
    if not m:
        return []
    params = reducer_params(ddp, session.tracer.state)
    idx, name = int(m.group(1)), m.group(2)
    if not name and 0 <= idx < len(params):
        name = params[idx][0]
    if not name:
        return []
    mname, mod = _owner(ddp, name)
    data = session.tracer.hooks.data
    rec = data.modules.get(id(mod)) if mod is not None else None
    runs = session.progress.calls.get(id(mod), 0) if mod is not None else 0
    sites = [list(s) for s in session.progress.repeat_sites.get(id(mod), [])] if mod else []
    first = rec.site if rec is not None and rec.ref() is mod else None
    return [{"name": name, "module": mname, "runs": runs, "site": _site_list(first),
             "repeats": sites, "checkpoint": _mentions_checkpoint([first, *sites])}]


def _mentions_checkpoint(sites: list[Any]) -> bool:
    import linecache

    for s in sites:
        if s is None:
            continue
        path, line = (s.path, s.line) if isinstance(s, Site) else (s[0], s[1])
        if "checkpoint" in linecache.getline(path, line):
            return True
    return False


# -- small helpers ------------------------------------------------------------------------------
def _user_site(exc: BaseException) -> Site | None:
    from gradtrace.runtime.trace.posthoc import user_tb_frame

    hit = user_tb_frame(exc)
    return hit[1] if hit is not None else None


def _site_list(site: Any) -> list[Any] | None:
    if site is None:
        return None
    if isinstance(site, Site):
        return [site.path, site.line, site.function]
    return list(site)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:300]


def unused_flag_at(site: Any) -> list[Any] | None:
    """The one ``DistributedDataParallel(..., find_unused_parameters=True)`` call of the file
    of ``site`` ([path, line]), as [path, line]; None if there is not exactly one."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site[0]) if site else None
    hits = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and any(
        k.arg == "find_unused_parameters" and isinstance(k.value, ast.Constant)
        and k.value.value is True for k in n.keywords)] if tree is not None else []
    return [site[0], hits[0]] if len(hits) == 1 else None
