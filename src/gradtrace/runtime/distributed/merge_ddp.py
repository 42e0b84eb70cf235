"""Rank 0's DDP diagnoses from every rank's facts: parameters that received no gradient (never
run, rank-dependent branches, frozen after wrapping) and parameters marked ready twice, with
their fixes. :func:`merge.merge_records` collects them."""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.distributed.merged_finding import Rec, _shown, make, ranks_text

FIX_UNUSED = ("if these parameters are meant to be unused, pass find_unused_parameters=True "
              "to DistributedDataParallel (or static_graph=True when the same parameters are "
              "unused in every iteration); otherwise fix the code so that they reach the loss")
FIX_BRANCH = ("make every rank take the same branch in each iteration (decide it from values "
              "all ranks share), or pass find_unused_parameters=True to "
              "DistributedDataParallel (static_graph=True only if each rank's set of used "
              "parameters never changes from one iteration to the next)")
FIX_TWICE = ("checkpoint with torch.utils.checkpoint.checkpoint(..., use_reentrant=False), or "
             "pass static_graph=True to DistributedDataParallel if the graph is the same in "
             "every iteration; or do not run the same parameters through several reentrant "
             "checkpoints/backward passes in one iteration")
WHY_TEXT = {
    "not-run": "its module `{module}` never ran in a forward pass (defined but "
               "not used in forward?)",
    "not-run-this-iteration": "its module `{module}` did not run in that iteration (it ran "
                              "in other iterations: a data- or step-dependent branch)",
    "no-grad": "its module `{module}` only ran with grad mode off",
    "cut": "it is used in forward, but the graph was cut here: {detail}",
    "output-unused": "its module `{module}` ran in forward, but its output did not reach the "
                     "loss (an unused output of forward()?)",
    "param-unused": "it did not reach the loss (not used in forward, or its result was not "
                    "part of the loss)",
    "frozen-after-wrap": "it was frozen (requires_grad=False) here after DistributedDataParallel "
                         "was built, and DDP still waits for its gradient",
    "frozen-by-train-override": "{detail}, which ran after DistributedDataParallel was built; "
                                "the constructor that ends here does not apply it, and DDP "
                                "still waits for its gradient",
}
_USED_ELSEWHERE = ("not-run-this-iteration", "output-unused", "param-unused")
FIX_FROZEN = ("freeze parameters before wrapping the model in DistributedDataParallel (DDP "
              "leaves out parameters that do not require grad when it is built), or wrap it "
              "again after freezing")
# -- unused parameters and rank-dependent branches --------------------------------------------
def _ddp_findings(records: list[Rec]) -> list[Finding]:
    unused = {int(r["rank"]): r["facts"] for r in records
              if (r.get("facts") or {}).get("kind") == "unused"}
    # ranks whose collective failed in the iteration the others found parameters unused in
    peers = {int(r["rank"]): r["facts"] for r in records
             if (r.get("facts") or {}).get("kind") in ("timeout", "peer-closed")
             and "used" in r["facts"] and unused and r["facts"].get("iteration") in
             {f.get("iteration") for f in unused.values()}}
    out = _unused_findings(unused, peers) if unused else []
    twice = {int(r["rank"]): r["facts"] for r in records
             if (r.get("facts") or {}).get("kind") == "ready-twice"}
    if twice:
        out += _twice_findings(twice)
    return out


def _unused_findings(by_rank: dict[int, Rec], peers: dict[int, Rec]) -> list[Finding]:
    names: dict[str, dict[int, Rec]] = {}
    for rank, facts in by_rank.items():
        for p in facts.get("params", ()):
            names.setdefault(p["name"], {})[rank] = p
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, per_rank in names.items():
        first = per_rank[min(per_rank)]
        used_on = tuple(sorted([r for r in by_rank if r not in per_rank] + [
            r for r, f in peers.items() if first.get("module") in f["used"]]))
        key = ("branch", first.get("module"), used_on, tuple(sorted(per_rank))) if used_on \
            else ("all", first["why"], tuple(first.get("site") or ()), tuple(sorted(per_rank)))
        groups.setdefault(key, []).append(name)
    out = []
    for key, group in groups.items():
        per_rank = names[group[0]]
        if key[0] == "branch":
            out.append(_branch_finding(group, per_rank, key[2], {**peers, **by_rank}))
        else:
            out.append(_all_unused_finding(group, per_rank, by_rank))
    if not out and by_rank:  # the DDP module or the indices were not found
        rank = min(by_rank)
        out.append(make("GT880", by_rank[rank].get("site"), "DistributedDataParallel: some "
                        "parameters received no gradient in the previous iteration (parameters "
                        "that did not take part in the loss)", FIX_UNUSED))
    return out


def _all_unused_finding(group: list[str], per_rank: dict[int, Rec],
                        by_rank: dict[int, Rec]) -> Finding:
    rank = min(per_rank)
    p, facts = per_rank[rank], by_rank[rank]
    why = WHY_TEXT.get(p["why"], WHY_TEXT["param-unused"]).format(
        module=p.get("module") or "the model", detail=p.get("detail", ""))
    extra = ""
    if facts.get("find_unused"):
        extra = ("; find_unused_parameters=True is already set, so (as torch's message says) "
                 "DDP could not locate the output tensors in the value forward() returned")
    msg = (f"DistributedDataParallel: {_shown(group)} received no gradient in iteration "
           f"{facts.get('iteration', '?')} on {ranks_text(per_rank)}: {why}, so DDP waited for "
           f"their gradients and raised \"Expected to have finished reduction in the prior "
           f"iteration\" at the next forward{extra}")
    related = [(p.get("call"), "the module was called here in other iterations")] \
        if p["why"] == "not-run-this-iteration" else []
    related.append((facts.get("site"), f"DDP raised the error here on rank {rank}"))
    fix = FIX_FROZEN if p["why"].startswith("frozen-") else FIX_UNUSED
    lead = p.get("site") or facts.get("site")
    if p["why"] in _USED_ELSEWHERE and facts.get("built") and not facts.get("find_unused"):
        # the module does the model's work (it ran, now or in other iterations), only not on
        # the loss's path every time: change the wrapper that assumes every parameter is used
        related.insert(0, (lead, f"`{p.get('module') or 'the model'}` is defined/ran here"))
        if facts.get("default"):  # NOTE [flag left at its default]
            related.insert(0, (facts["built"], "DistributedDataParallel was built here, "
                                               "passing that flag on"))
            msg += ("; DistributedDataParallel was built without find_unused_parameters=True: "
                    "the flag it got is this default (the caller left the argument out)")
            lead = facts["default"]
        else:
            msg += "; DistributedDataParallel was built here without find_unused_parameters=True"
            lead = facts["built"]
    return make("GT880", lead, msg, fix, related)


def _branch_finding(group: list[str], per_rank: dict[int, Rec], used_on: tuple[int, ...],
                    by_rank: dict[int, Rec]) -> Finding:
    unused_on = sorted(per_rank)
    p = per_rank[unused_on[0]]
    module = p.get("module") or "the model"
    call = next((by_rank[r].get("used", {}).get(module) for r in used_on
                 if by_rank[r].get("used", {}).get(module)), None)
    it = by_rank[unused_on[0]].get("iteration", "?")
    if p["why"] in ("not-run", "not-run-this-iteration"):
        why = f"`{module}` did not run in forward there"
    else:
        why = WHY_TEXT.get(p["why"], WHY_TEXT["param-unused"]).format(module=module,
                                                                      detail=p.get("detail", ""))
    msg = (f"DistributedDataParallel: in iteration {it}, {_shown(group)} got gradients on "
           f"{ranks_text(used_on)} but not on {ranks_text(unused_on)} ({why}): a branch taken "
           f"only on some ranks" + (f"; `{module}` was called here on {ranks_text(used_on)}"
                                    if call else "")
           + ". DDP raised \"Expected to have finished reduction in the prior iteration\" (it "
           "can also hang when ranks launch different all-reduces)")
    related = [(p.get("site"), f"why {ranks_text(unused_on)} got none")] \
        if p["why"] not in ("not-run", "not-run-this-iteration") and p.get("site") else []
    related.append((by_rank[unused_on[0]].get("site"), "DDP raised the error here"))
    return make("GT881", call or p.get("site"), msg, FIX_BRANCH, related)


def _twice_findings(by_rank: dict[int, Rec]) -> list[Finding]:
    from gradtrace.runtime.distributed.diagnose import unused_flag_at

    groups: dict[str, tuple[Rec, Rec, list[int]]] = {}
    for rank, facts in sorted(by_rank.items()):
        for p in facts.get("params", ()):
            groups.setdefault(p["name"], (p, facts, []))[2].append(rank)
    out = []
    for name, (p, facts, ranks) in groups.items():
        built = unused_flag_at(p.get("site")) if facts.get("find_unused") and not (
            p.get("checkpoint") or (p.get("runs") or 0) > 1) else None
        if built is not None:  # its module ran once: the model ran several forwards
            out.append(make("GT882", built, f"DistributedDataParallel ({ranks_text(ranks)}): "
                            f"parameter {name} was marked ready twice in one backward: the "
                            "model is called several times before one backward(), and "
                            "find_unused_parameters=True (set here) marks the parameters a "
                            "call did not use as ready at once; a later call then uses them",
                            "drop find_unused_parameters=True (every parameter is used by the "
                            "summed loss), or run backward() after each call",
                            [(p.get("site"), "its layer ran here, in one of those calls"),
                             (facts.get("site"), "backward() failed here")]))
            continue
        where = [s for s in [p.get("site"), *p.get("repeats", ())] if s]
        lines = ", ".join(str(s[1]) for s in where[:4])
        how = f"its module `{p.get('module') or 'the model'}` was called {p.get('runs', '?')} " \
              f"times in one forward pass" + (f" (lines {lines})" if lines else "")
        if p.get("checkpoint"):
            how += " inside reentrant activation checkpointing (use_reentrant=True): each " \
                   "checkpoint recomputes and backpropagates its segment in a separate " \
                   "backward pass, so DDP's hook for the parameter fires once per checkpoint"
        msg = (f"DistributedDataParallel ({ranks_text(ranks)}): parameter {name} was marked "
               f"ready twice in one backward: {how}")
        related = [(s, "called again here") for s in p.get("repeats", ())[:3]]
        related.append((facts.get("site"), "backward() failed here"))
        out.append(make("GT882", p.get("site") or facts.get("site"), msg, FIX_TWICE, related))
    if not out:
        rank = min(by_rank)
        out.append(make("GT882", by_rank[rank].get("site"), f"DistributedDataParallel "
                        f"({ranks_text(by_rank)}): a parameter was marked ready twice in one "
                        "backward (used in several reentrant backward passes, or shared across "
                        "concurrent forwards)", FIX_TWICE))
    return out
