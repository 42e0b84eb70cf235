"""Rank 0's merge: every rank's record -> one list of findings saying which rank saw what."""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.distributed.merge_ddp import _ddp_findings
from gradtrace.runtime.distributed.merged_finding import Rec, _shown, make, ranks_text


def merge_records(records: list[Rec], world: int, *, own_rank: int = 0,
                  note: str = "") -> list[Finding]:
    """All findings of all ranks, merged; the DDP/collective diagnoses built from the facts."""
    out = layout_findings(records) + _ddp_findings(records) + \
        _collective_findings(records, world) + _unsynced_findings(records) + \
        _sync_findings(records)
    unused = {p["name"] for r in records for p in (r.get("facts") or {}).get("params", ())}
    out += _merge_plain(records, world, unused)
    if note:
        out = [Finding(code=f.code, name=f.name, message=f"{f.message} ({note})", path=f.path,
                       line=f.line, column=f.column, severity=f.severity, related=f.related,
                       fix=f.fix, source=f.source) for f in out]
    return out


def findings_from_records(records: list[Rec], world: int) -> list[Finding]:
    """Only the DDP/collective/sync diagnoses of ``records`` (no plain findings)."""
    return layout_findings(records) + _ddp_findings(records) + \
        _collective_findings(records, world) + _unsynced_findings(records) + \
        _sync_findings(records)


def fuse_merged(found: list[Finding]) -> list[Finding]:
    """The merged findings with each DDP/collective diagnosis replaced by the static finding
    that accounts for it (NOTE [ranking] in gradtrace.runtime.fuse); a rank's own copy of that
    static finding is then left out."""
    from gradtrace.code_tables.distributed import CODES
    from gradtrace.runtime.fuse import fuse_session

    ours = {c.code for c in CODES}
    runtime = [f for f in found if f.code in ours]
    if not runtime:
        return found
    fused = fuse_session(runtime, (), None, unconfirmed=False)
    taken = {(f.code, f.path, f.line) for f in fused if f.source == "static+runtime"}
    return fused + [f for f in found if f.code not in ours
                    and (f.code, f.path, f.line) not in taken]


def unconfirmed(diagnoses: list[Finding], own: list[Finding]) -> list[Finding]:
    """This process's DDP diagnoses minus those a finding of ``own`` already carries as the
    run-time confirmation of a static finding (fused in its place: NOTE [ranking] in
    gradtrace.runtime.fuse), so that the static cause is not preceded by its own evidence."""
    from gradtrace.runtime.fuse import CONFIRMED

    told = {(r.path, r.line, r.message) for f in own if f.source == "static+runtime"
            for r in f.related if r.message.startswith(CONFIRMED)}
    return [d for d in diagnoses
            if (d.path, d.line, f"{CONFIRMED}({d.code}) {d.message}") not in told]


# -- plain findings: which rank saw what ------------------------------------------------------
def _merge_plain(records: list[Rec], world: int, unused: set[str]) -> list[Finding]:
    seen: dict[tuple[Any, ...], tuple[Finding, list[int]]] = {}
    for r in records:
        for d in r.get("findings") or ():
            f = Finding.from_dict(d)
            if unused and "never received a gradient" in f.message and any(
                    f"module.{n}" in f.message for n in unused):
                continue  # explained by the DDP diagnosis
            key = (f.code, f.path, f.line, f.message)
            seen.setdefault(key, (f, []))[1].append(int(r.get("rank", 0)))
    if world <= 1:
        return [f for f, _ in seen.values()]
    out = []
    for f, ranks in seen.values():
        label = f"all {world} ranks" if len(set(ranks)) >= world else ranks_text(ranks)
        out.append(Finding(code=f.code, name=f.name, message=f"[{label}] {f.message}",
                           path=f.path, line=f.line, column=f.column, end_line=f.end_line,
                           end_column=f.end_column, severity=f.severity, related=f.related,
                           fix=f.fix, source=f.source))
    return out


# -- hangs, timeouts, ranks out of step ---------------------------------------------------------
def _counts_text(r: Rec) -> str:
    c = r.get("counts") or {}
    status = str(r.get("status"))
    state = {"no-report": "no report: from its last heartbeat"}.get(status, status)
    return (f"rank {r.get('rank')}: {c.get('forward', '?')} DDP forward, "
            f"{c.get('backward', '?')} backward, {c.get('steps', '?')} optimizer steps "
            f"({state})")


def _collective_findings(records: list[Rec], world: int) -> list[Finding]:
    failed = [r for r in records if (r.get("facts") or {}).get("kind") in ("timeout",
                                                                           "peer-closed")]
    if any((r.get("facts") or {}).get("kind") in ("unused", "ready-twice") for r in records):
        failed = []  # a peer's DDP error (reported above) ended the collective it waited in
    missing = [r for r in records if not r.get("final")]
    if not failed and not missing:
        return []
    counts = {tuple(sorted((r.get("counts") or {}).items())) for r in records}
    out: list[Finding] = []
    related: list[Any] = []
    for r in records:
        where = r.get("where")
        if not r.get("final") and where:
            related.append((where, f"rank {r['rank']} was here when last seen"))
        for it, site in (r.get("skipped") or [])[:2]:
            related.append((site, f"rank {r['rank']} ran this forward (iteration {it}) "
                                  "without a backward()"))
    step = "; ".join(_counts_text(r) for r in records)
    if failed:
        r = failed[0]
        f = r["facts"]
        what = "timed out" if f["kind"] == "timeout" else "failed because a peer closed the " \
            "connection (it exited or crashed)"
        diverged = len(counts) > 1 or any(r.get("skipped") for r in records)
        msg = (f"a collective {what} on {ranks_text(x['rank'] for x in failed)} "
               f"({f.get('error', '')}). " + (
                   f"The ranks were out of step: {step}" if diverged else f"Counters: {step}")
               + (". A rank that skips backward() or optimizer.step() (or runs an extra one) "
                  "makes the next all-reduce wait for a partner that never comes"
                  if diverged else ""))
        site = f.get("site")
        root = _divergence(records) if diverged else None
        if root is not None and site:
            related.append((site, f"the collective failed here on rank {r['rank']}"))
            site = root
        out.append(make("GT883" if diverged else "GT885", site, msg,
                        "make every rank run the same sequence of forward/backward/step "
                        "(skip steps on all ranks together, e.g. after an all_reduce of the "
                        "skip flag)" if diverged else "", related))
    for r in missing:
        out.append(make("GT886", r.get("where"), f"rank {r['rank']} did not report within "
                        f"{r.get('waited', 0):g} s (still running, hung in a collective, or "
                        f"killed); {_counts_text(r)}", severity="info"))
    return out


# -- gradients that differ across ranks ---------------------------------------------------------
def _sync_findings(records: list[Rec]) -> list[Finding]:
    seen: dict[tuple[Any, ...], tuple[Rec, list[int]]] = {}
    for r in records:
        for s in r.get("sync") or ():
            key = (tuple(p["name"] for p in s.get("params", ())), s.get("why"))
            seen.setdefault(key, (s, []))[1].append(int(r.get("rank", 0)))
    out = []
    for s, ranks in seen.values():
        names = [p["name"] for p in s.get("params", ())]
        spread = "; ".join(f"{p['name']}: gradient sum from {p['lo']:.6g} to {p['hi']:.6g}"
                           for p in s.get("params", ())[:3])
        again = f", and at {s['count'] - 1} later check(s)" if s.get("count", 1) > 1 else ""
        out.append(make("GT884", s.get("site"), f"gradients differ across ranks after the "
                        f"all-reduce at optimizer step {s.get('step')}{again} (checked on "
                        f"{ranks_text(ranks)}): {_shown(names)} ({spread}). {s.get('why', '')}",
                        s.get("fix", ""), severity="error"))
    return out


# -- optimizer steps on gradients DDP never all-reduced (NOTE [steps without all-reduce]) ------
UNSYNCED_WHY = {  # no-sync: NOTE [last micro-batch inside no_sync]
    "bypass": ("the forward ran through the module inside DistributedDataParallel, not through "
               "the wrapper, so DDP never all-reduced the gradients of that backward",
               "call the DistributedDataParallel wrapper itself in training (`model(x)`); use "
               "`model.module` only for evaluation, saving or attributes"),
    "no-sync": ("the last forward through DistributedDataParallel before the step ran inside "
                "`no_sync()`, so DDP never all-reduced the gradients accumulated since its last "
                "synced backward",
                "run the forward and backward of the last micro-batch before each optimizer "
                "step outside `no_sync()`"),
    "late-flag": ("the last forward through DistributedDataParallel before the step ran with "
                  "`require_backward_grad_sync` off, and the flag was on when its backward began: "
                  "DDP reads it in the forward, so setting it after the forward does not make "
                  "that backward all-reduce",  # NOTE [sync flag turned on after the forward]
                  "set `require_backward_grad_sync` (or enter `no_sync()`) before the forward "
                  "of the micro-batch it is meant for"),
}


def _unsynced_findings(records: list[Rec]) -> list[Finding]:
    seen: dict[tuple[Any, ...], tuple[Rec, list[int]]] = {}
    for r in records:
        for u in r.get("unsynced") or ():
            key = (u.get("kind"), tuple(u.get("site") or ()))
            seen.setdefault(key, (u, []))[1].append(int(r.get("rank", 0)))
    out = []
    for u, ranks in seen.values():
        kind, site = u.get("kind"), u.get("site") or u.get("step_site")
        block = _no_sync_block(str(site[0]), int(site[1])) \
            if kind in ("no-sync", "late-flag") and site else None
        if block:  # the forward sits in a `with ...no_sync():` of its own frame
            kind = "no-sync"
        why, fix = UNSYNCED_WHY.get(kind, UNSYNCED_WHY["bypass"])
        more = f" (and {u['count'] - 1} later step(s))" if u.get("count", 1) > 1 else ""
        msg = (f"optimizer step {u.get('step', '?')}{more} on {ranks_text(ranks)} applied "
               f"gradients DDP never all-reduced: {why}; each rank trains on its own "
               "gradients and the replicas drift apart")
        related = [(u.get("step_site"), "the optimizer step that applied them")]
        if block:  # the `with ...no_sync():` is the line to change
            related.insert(0, (site, "the forward inside it"))
            site = [site[0], block]
        out.append(make("GT887", site, msg, fix, related))
    return out


def _no_sync_block(path: str, line: int) -> int | None:
    """The line of the innermost ``with <...>.no_sync(...):`` around ``line`` (None if none)."""
    import ast
    import linecache

    try:
        tree = ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.body and \
                node.lineno < line <= (node.end_lineno or 0) and any(
                    isinstance(i.context_expr, ast.Call)
                    and isinstance(i.context_expr.func, ast.Attribute)
                    and i.context_expr.func.attr == "no_sync" for i in node.items):
            if best is None or node.lineno > best:
                best = node.lineno
    return best


# -- where the ranks parted ---------------------------------------------------------------------
def _divergence(records: list[Rec]) -> list[Any] | None:
    """The ``if`` where a rank that ran a forward without a backward parted from the ranks
    that ran it: the innermost ``if`` around the backward line but not the forward line, else
    an ``if`` between the two lines that leaves the iteration (continue, break, return,
    raise). ``[path, line]`` or None."""
    import ast
    import linecache

    skips = [s for r in records for _, s in (r.get("skipped") or ()) if s]
    backs = [r.get("backward_site") for r in records if r.get("backward_site")]
    for fwd in skips[:1]:
        path, fline = str(fwd[0]), int(fwd[1])
        blines = sorted({int(b[1]) for b in backs if str(b[0]) == path and int(b[1]) > fline})
        if not blines:
            return None
        try:
            tree = ast.parse("".join(linecache.getlines(path)))
        except (SyntaxError, ValueError):
            return None
        bline = blines[0]
        scope = _scope(tree, fline, bline)
        if scope is None:
            return None
        ifs = [n for n in ast.walk(scope) if isinstance(n, ast.If)]
        around = [n for n in ifs if n.lineno <= bline <= (n.end_lineno or 0)
                  and not n.lineno <= fline <= (n.end_lineno or 0)]
        if around:
            return [path, max(n.lineno for n in around)]
        leaves = (ast.Continue, ast.Break, ast.Return, ast.Raise)
        between = [n for n in ifs if fline < n.lineno < bline
                   and any(isinstance(x, leaves) for x in ast.walk(n))]
        if between:
            return [path, min(n.lineno for n in between)]
    return None


def _scope(tree: Any, a: int, b: int) -> Any:
    """The innermost loop (else function, else module) holding lines ``a`` and ``b``, when
    both are in the same function; else None."""
    import ast

    def inside(n: Any, line: int) -> bool:
        return n.lineno <= line <= (n.end_lineno or 0)

    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    fa = max((n for n in funcs if inside(n, a)), key=lambda n: n.lineno, default=None)
    fb = max((n for n in funcs if inside(n, b)), key=lambda n: n.lineno, default=None)
    if fa is not fb:
        return None
    body = fa if fa is not None else tree
    loops = [n for n in ast.walk(body) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))
             and inside(n, a) and inside(n, b)]
    return max(loops, key=lambda n: n.lineno, default=body)


# -- parameters in another order on some rank (NOTE [parameter layout across ranks]) ----------
def layout_findings(records: list[dict[str, Any]]) -> list[Any]:
    """GT888 for each DDP wrapper whose layout differs between ranks (first difference)."""
    out = []
    ranks = sorted((int(r.get("rank", 0)), r.get("layouts") or []) for r in records)
    if len(ranks) < 2:
        return out
    ref_rank, ref = ranks[0]
    for k, a in enumerate(ref):
        for rank, lays in ranks[1:]:
            if k >= len(lays):
                continue
            b = lays[k]
            i = next((j for j, (x, y) in enumerate(zip(a["names"], b["names"])) if x != y),
                     None)
            if i is None:
                break
            x, y = a["names"][i], b["names"][i]
            same = a["shapes"][i] == b["shapes"][i]
            what = (f"so the gradient of `{x}` on rank {ref_rank} is averaged with that of "
                    f"`{y}` on rank {rank} (same shape: no error, wrong training)") if same \
                else ("their shapes differ, and DDP's constructor fails (\"appears not to "
                      "match sizes of the same param\")")
            msg = (f"DistributedDataParallel holds its parameters in a different order on "
                   f"rank {rank} than on rank {ref_rank}: position {i} is `{x}` on rank "
                   f"{ref_rank} but `{y}` on rank {rank}. DDP pairs the ranks' gradients by "
                   f"position, {what}. The submodules were registered in a different order "
                   "(iterating a set, a rank-dependent list or branch)")
            site = b["sites"][i] or a["sites"][i] or b.get("site")
            related = [(a["sites"][i], f"`{x}`'s module registered here on rank {ref_rank}"),
                       (b.get("site"), "the model was wrapped here")]
            out.append(make("GT888", site, msg, "build the model the same way on every rank: "
                            "register submodules in a fixed order (sort names; no set "
                            "iteration, no rank-dependent structure)",
                            [r for r in related if r[0] and r[0] != site]))
            break
    return out
