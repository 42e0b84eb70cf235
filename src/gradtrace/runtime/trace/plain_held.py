"""Layers held in a plain list/dict attribute whose weights the forward reads directly.

# NOTE [uncalled layers in a plain container]
``self.embeddings = {nt: nn.Embedding(n, d) for nt in types}`` then, in ``forward``,
``adj @ self.embeddings[nt].weight``: the layers are never *called*, so the module hooks never
see them run (the unregistered-owner reading in silent.py starts from layers that ran), yet
their weights get gradients at every backward(). The container is a plain attribute of a
module that ran and does not register them, so ``model.parameters()`` and the optimizer miss
them. Noted when such a layer's parameters have a gradient, belong to no optimizer, and the
layer never ran itself; the finding is the one of a layer that ran in a plain container
(GT401 at the container's assignment).
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.frames import Site


def uncalled_in_plain_container(data: Any, in_opt: set[int],
                                groups: dict[tuple[str, Site | None, str, str], list[str]]
                                ) -> None:
    """NOTE [uncalled layers in a plain container]: adds to ``groups`` (silent.py's)."""
    from gradtrace.runtime.trace.hooks import attribute_site

    ran = {k for k, r in list(data.modules.items()) if r.grad_runs and r.ref() is not None}
    for rec in list(data.modules.values()):
        parent = rec.ref()
        if parent is None or rec.grad_runs == 0:
            continue
        registered: set[int] | None = None
        for attr, value in vars(parent).items():
            items = list(value.items()) if isinstance(value, dict) else list(
                enumerate(value)) if isinstance(value, (list, tuple)) else []
            for key, child in items:
                if not isinstance(child, torch.nn.Module) or (
                        parent.training and not child.training):  # kept in eval: not trained
                    continue
                hits = [(n, p) for m in child.modules() if id(m) not in ran
                        for n, p in m.named_parameters(recurse=False)
                        if p.requires_grad and p.grad is not None and id(p) not in in_opt]
                if not hits:
                    continue
                if registered is None:
                    registered = {id(m) for m in parent.modules()}
                if id(child) in registered:
                    continue
                owner = f"{type(parent).__name__}.{attr}"
                site = attribute_site(type(parent), attr) or rec.site
                k = ("unregistered-submodule", site,
                     f"the layer is held in the plain container {owner}, which does not register"
                     " it as a submodule, so model.parameters() misses it",
                     "hold layers in nn.ModuleList / nn.ModuleDict (parameters in "
                     "nn.ParameterList)")
                groups.setdefault(k, []).extend(f"{owner}[{key!r}].{n}" for n, _ in hits)
