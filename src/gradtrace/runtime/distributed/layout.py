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
compares them (:func:`gradtrace.runtime.distributed.merge.layout_findings`).
"""
from __future__ import annotations

import weakref
from typing import Any

CAP = 4096  # names kept per wrapper
SITES_CAP = 20000  # submodule registrations remembered


class Layouts:
    """Where submodules were registered, and the parameter layout of each DDP wrapper."""

    def __init__(self) -> None:
        # submodule -> [path, line] where it was set; weak, so that a module freed and another
        # made at its address never inherits its line (an ``id()`` key would)
        self.sites: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
        self.found: list[dict[str, Any]] = []

    def registered(self, submodule: Any, site: Any) -> None:
        if site is not None and len(self.sites) < SITES_CAP:
            try:
                self.sites.setdefault(submodule, [site[0], site[1]])
            except TypeError:  # a module class that cannot be weakly referenced or hashed
                pass

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
                    where.append(_site_of(self.sites, mod))
        if len(self.found) < 8:
            self.found.append({"names": names, "shapes": shapes, "sites": where,
                               "count": len(seen), "site": list(site) if site else None})


def _site_of(sites: weakref.WeakKeyDictionary[Any, list[Any]], mod: Any) -> Any:
    try:
        return sites.get(mod)
    except TypeError:
        return None
