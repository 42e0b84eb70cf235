"""DDP models whose parameters differ in order (or shape) across ranks (GT888).

# NOTE [parameter layout across ranks]
DistributedDataParallel's reducer pairs the ranks' gradients by position: the i-th parameter
(``named_modules()`` order, then each module's own parameters, those that require grad) of
every rank goes into the same all-reduce slot. Its constructor checks that the shapes match
(``params[i] in this process with sizes [..] appears not to match sizes of the same param in
process 0``) but not the names, so a model whose submodules were registered in a different
order on some rank (iterating a ``set``, a rank-dependent list) trains with one layer's
gradient averaged into another of the same shape. Each rank records, when a DDP wrapper is
built (a module registration hook sees ``ddp.module`` being set), the names and shapes in the
reducer's order and where each submodule was registered; rank 0 (or the spawn parent)
compares them.
"""
from __future__ import annotations

from typing import Any

CAP = 4096  # names kept per wrapper
SITES_CAP = 20000  # submodule registrations remembered


class Layouts:
    """Where submodules were registered, and the parameter layout of each DDP wrapper."""

    def __init__(self) -> None:
        self.sites: dict[int, Any] = {}  # id(submodule) -> [path, line] where it was set
        self.found: list[dict[str, Any]] = []

    def registered(self, submodule: Any, site: Any) -> None:
        if site is not None and len(self.sites) < SITES_CAP:
            self.sites.setdefault(id(submodule), [site[0], site[1]])

    def wrapped(self, module: Any, site: Any) -> None:
        """``module`` is being wrapped by DDP (built at ``site``)."""
        names: list[str] = []
        shapes: list[list[int]] = []
        where: list[Any] = []
        seen: set[int] = set()
        for mname, mod in module.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                if id(p) in seen or not p.requires_grad:
                    continue
                seen.add(id(p))
                if len(names) < CAP:
                    names.append(f"{mname}.{pname}" if mname else pname)
                    shapes.append(list(p.shape))
                    where.append(self.sites.get(id(mod)))
        if len(self.found) < 8:
            self.found.append({"names": names, "shapes": shapes, "sites": where,
                               "count": len(seen), "site": list(site) if site else None})


def layout_findings(records: list[dict[str, Any]]) -> list[Any]:
    """GT888 for each DDP wrapper whose layout differs between ranks (first difference)."""
    from gradtrace.runtime.distributed.merge import make

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
