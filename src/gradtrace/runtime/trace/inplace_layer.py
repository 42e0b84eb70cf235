"""The torch layer built with ``inplace=True`` whose own write a crash refuses.

# NOTE [in-place layer called directly]
NOTE [layer built here] names where a torch layer was built only when an ``nn.Sequential``
called it: a layer the user's own line calls is named by that line. An in-place layer is the
exception for the crashes about the write itself: ``out = self.relu(self.bn1(x))`` writes
nothing in place as written; the write is the layer's own, decided by ``inplace=True`` where it
was built (``self.relu = nn.ReLU(inplace=True)``), and that is the line to change (shap's
DeepExplainer puts a full backward hook on every leaf module, so the ReLU's input is the output
of ``BackwardHookFunction``, a view autograd will not let it overwrite). Run-time fact: the
innermost module ``forward`` on the stack at the failing op is a torch layer whose ``inplace``
attribute is True, the view it refuses is the output of ``BackwardHookFunction`` (the layer's
own full backward hook wraps every input it gets: no call of that layer can write in place), and
the registration hook saw where it was built. A view that only this call's input is (a chunk of
``torch.split``, a custom Function's output: ESRGCNN's shared ``self.ReLU`` applied to one split
half) leaves the call named: the other calls of the same layer are fine.
"""
from __future__ import annotations

import sys
from typing import Any

from gradtrace.runtime.frames import Site


def inplace_layer_built(state: Any, view: Any, limit: int = 32) -> Site | None:
    """Where the in-place torch layer running the failing op was built (NOTE), or None.
    ``view``: the match of "Output N of (Function) is a view" in the error."""
    from gradtrace.runtime.trace.layer_sites import _torch_layer, built_site, forward_selves

    built = getattr(getattr(state, "hooks_data", None), "built", None)
    if not built or not view or view[1] != "BackwardHookFunction":
        return None
    for me in forward_selves(sys._getframe(1), limit):
        if _torch_layer(me):
            return built_site(built, me) if getattr(me, "inplace", False) is True else None
    return None
