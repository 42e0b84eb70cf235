"""What a watch knows of each parameter: its qualified name, owning module and class site."""
from __future__ import annotations

import gc
import inspect

import torch

from gradtrace.report.model import ParamInfo

_CLASS_SITES: dict[type, tuple[str, int] | None] = {}


def class_site(cls: type) -> tuple[str, int] | None:
    """File and line of a user-defined module class (None for torch's own classes)."""
    if cls in _CLASS_SITES:
        return _CLASS_SITES[cls]
    site = None
    if not cls.__module__.startswith("torch."):
        try:
            path = inspect.getsourcefile(cls)
            line = inspect.getsourcelines(cls)[1]
            site = (path, line) if path else None
        except (OSError, TypeError):
            site = None
    _CLASS_SITES[cls] = site
    return site


def _owner_site(mods: dict[str, torch.nn.Module], mod_name: str) -> tuple[str, int] | None:
    """The class definition of the innermost user-defined module around ``mod_name``."""
    parts = mod_name.split(".") if mod_name else []
    for k in range(len(parts), -1, -1):
        m = mods.get(".".join(parts[:k]))
        site = class_site(type(m)) if m is not None else None
        if site is not None:
            return site
    return None


_WRAPPER_PREFIXES = ("_orig_mod.",)  # torch.compile's OptimizedModule


def _strip_wrapper(name: str) -> str:
    for prefix in _WRAPPER_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return "" if name + "." in _WRAPPER_PREFIXES else name


def describe_params(model: torch.nn.Module, opt_ids: set[int] | None,
                    only: set[int] | None = None) -> list[tuple[ParamInfo, torch.Tensor]]:
    """Qualified name, owning module and status of each parameter of ``model``."""
    mods = dict(model.named_modules())
    out = []
    for qn, p in model.named_parameters():
        if only is not None and id(p) not in only:
            continue
        mod_name = qn.rpartition(".")[0]
        mod = mods.get(mod_name)
        site = _owner_site(mods, mod_name)
        qn, mod_name = _strip_wrapper(qn), _strip_wrapper(mod_name)
        info = ParamInfo(qn, mod_name, type(mod).__name__ if mod is not None else "",
                         tuple(p.shape), bool(p.requires_grad),
                         None if opt_ids is None else id(p) in opt_ids,
                         site[0] if site else None, site[1] if site else None)
        out.append((info, p))
    return out


def caller_site() -> tuple[str, int]:
    """Where the user called us (first frame outside torch and gradtrace)."""
    try:
        from gradtrace.runtime.frames import user_frame
    except ImportError:  # pragma: no cover - frames is optional
        return ("<unknown>", 1)
    f = user_frame(2)
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("<unknown>", 1)


def optimizer_param_ids(optimizer: torch.optim.Optimizer) -> set[int]:
    """ids of every parameter in the optimizer's groups."""
    return {id(p) for g in optimizer.param_groups for p in g["params"]}


def owner_modules(param_ids: set[int]) -> list[tuple[str, torch.nn.Module]]:
    """Top-level modules (found by a one-off scan of live objects) owning these params."""
    module_cls = torch.nn.Module
    modules = [o for o in gc.get_objects() if issubclass(type(o), module_cls)]
    parent: dict[int, torch.nn.Module] = {}
    for m in modules:
        for c in m.children():
            parent.setdefault(id(c), m)
    roots: dict[int, torch.nn.Module] = {}
    for m in modules:
        if any(id(p) in param_ids for p in m.parameters(recurse=False)):
            top = m
            while id(top) in parent:
                top = parent[id(top)]
            roots[id(top)] = top
    return [(type(r).__name__, r) for r in roots.values()]
