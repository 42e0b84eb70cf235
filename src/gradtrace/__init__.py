"""gradtrace: find where gradients stop flowing in PyTorch code, and say why.

Importing this package never imports torch; the runtime names below load it on first use.
"""
from __future__ import annotations

import importlib
from typing import Any

from gradtrace._version import __version__
from gradtrace.findings import Edit, Finding, Fix, Related

__all__ = [
    "Edit",
    "Finding",
    "Fix",
    "Related",
    "__version__",
    "check_paths",
    "check_source",
    "compare_grad_modes",
    "explain",
    "graph",
    "load_ipython_extension",
    "trace",
    "unload_ipython_extension",
    "watch",
]

# name -> "module:attribute"; resolved lazily so that `import gradtrace` stays torch-free.
_LAZY = {
    "check_paths": "gradtrace.lint:check_paths",
    "check_source": "gradtrace.lint:check_source",
    "trace": "gradtrace.runtime.trace.tracer:trace",
    "explain": "gradtrace.runtime.trace.explain:explain",
    "watch": "gradtrace.runtime.watch.watcher:watch",
    "graph": "gradtrace.runtime.graph:graph",
    "compare_grad_modes": "gradtrace.runtime.watch.gradmodes:compare_grad_modes",
    "load_ipython_extension": "gradtrace.runtime.trace.ipython:load_ipython_extension",
    "unload_ipython_extension": "gradtrace.runtime.trace.ipython:unload_ipython_extension",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'gradtrace' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
