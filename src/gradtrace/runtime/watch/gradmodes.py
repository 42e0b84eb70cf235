"""``gradtrace.compare_grad_modes``: what ``no_grad`` / ``inference_mode`` save, per model.

There is no fixed saving (pytorch-facts.md#no-grad-saves-activations): memory depends on the
activations the graph keeps, time only on autograd's bookkeeping. This
function measures it for *your* model and inputs:

* time: median wall time of a forward in each mode, the modes interleaved;
* peak / held: bytes of tensor storages created by one forward, at their peak and still
  alive while the output is (counted exactly with a ``TorchDispatchMode``, on any device);
* saved: bytes autograd keeps for backward (``saved_tensors_hooks``; 0 without grad).

The model's buffers (BatchNorm statistics) and the global RNG are restored afterwards, so
measuring changes nothing in your training.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

MODES = ("grad", "no_grad", "inference_mode")


@dataclass(frozen=True)
class ModeStats:
    """One grad mode: median forward time, bytes saved for backward, extra peak memory."""

    mode: str
    time_ms: float
    saved_mb: float
    peak_mb: float
    held_mb: float


@dataclass(frozen=True)
class GradModeComparison:
    """The result of :func:`compare_grad_modes`; ``str()`` gives a table."""

    rows: tuple[ModeStats, ...]
    repeat: int
    device: str

    def row(self, mode: str) -> ModeStats:
        """The stats of one mode (``"grad"``, ``"no_grad"`` or ``"inference_mode"``)."""
        for r in self.rows:
            if r.mode == mode:
                return r
        raise KeyError(f"unknown mode {mode!r}; expected one of {MODES}")

    def saving(self, mode: str) -> float:
        """Relative time saving of ``mode`` versus grad mode (0.05 = 5 % faster)."""
        return 1.0 - self.row(mode).time_ms / self.row("grad").time_ms

    def __str__(self) -> str:
        base = self.row("grad")
        lines = [f"one forward on {self.device}, median time of {self.repeat} runs; memory = "
                 "tensor storages created by the forward",
                 f"{'mode':<16}{'time ms':>10}{'vs grad':>10}{'peak MB':>10}{'held MB':>10}"
                 f"{'saved MB':>10}"]
        for r in self.rows:
            delta = f"{(r.time_ms / base.time_ms - 1) * 100:+.1f}%" if r is not base else "-"
            lines.append(f"{r.mode:<16}{r.time_ms:>10.2f}{delta:>10}{r.peak_mb:>10.1f}"
                         f"{r.held_mb:>10.1f}{r.saved_mb:>10.1f}")
        return "\n".join(lines)


def _call(model: Any, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def _context(mode: str) -> Any:
    import torch

    if mode == "no_grad":
        return torch.no_grad()
    if mode == "inference_mode":
        return torch.inference_mode()
    return torch.enable_grad()


def _saved_bytes(model: Any, inputs: Any) -> int:
    import torch

    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        try:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        except RuntimeError:
            pass
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = _call(model, inputs)
    del out
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in seen.items() if ptr not in params)


def _peak_bytes(model: Any, inputs: Any, mode: str) -> tuple[int, int]:
    """(peak, still held after the forward) bytes of tensor storages created by one forward,
    counted with a TorchDispatchMode (exact, any device, independent of the allocator)."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    known = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    known |= {t.untyped_storage().data_ptr() for t in tree_flatten(inputs)[0]
              if isinstance(t, torch.Tensor)}
    state = {"cur": 0, "peak": 0}
    live: dict[int, int] = {}

    def free(ptr: int) -> None:
        state["cur"] -= live.pop(ptr, 0)

    class Meter(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                st = t.untyped_storage()
                ptr = st.data_ptr()
                if ptr and ptr not in known and ptr not in live:
                    live[ptr] = st.nbytes()
                    state["cur"] += st.nbytes()
                    state["peak"] = max(state["peak"], state["cur"])
                    weakref.finalize(t, free, ptr)
            return out

    with _context(mode), Meter():
        out = _call(model, inputs)
    held = state["cur"]
    del out
    return state["peak"], held


def _time_once(model: Any, inputs: Any, mode: str, sync: Callable[[], None]) -> float:
    with _context(mode):
        t0 = time.perf_counter()
        out = _call(model, inputs)
        sync()
        dt = time.perf_counter() - t0
    del out
    return dt


def compare_grad_modes(model: Any, inputs: Any, repeat: int = 5) -> GradModeComparison:
    """Time and memory of one forward of ``model(inputs)`` under grad, ``no_grad`` and
    ``inference_mode``. ``inputs`` is a tensor, a tuple of positional arguments or a dict
    of keyword arguments. Buffers and RNG state are restored afterwards."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare_grad_modes expects an nn.Module, got {type(model).__name__}")
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive int, got {repeat!r}")
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    cuda = [device.index or 0] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=cuda):
            return _measure(model, inputs, repeat, device, sync)
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def _measure(model: Any, inputs: Any, repeat: int, device: Any,
             sync: Callable[[], None]) -> GradModeComparison:
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for m in MODES:  # warm-up
        _time_once(model, inputs, m, sync)
    for _ in range(repeat):
        for m in MODES:
            times[m].append(_time_once(model, inputs, m, sync))
    rows = []
    saved = _saved_bytes(model, inputs)
    for m in MODES:
        peak, held = _peak_bytes(model, inputs, m)
        rows.append(ModeStats(m, statistics.median(times[m]) * 1e3,
                              saved / 2**20 if m == "grad" else 0.0, peak / 2**20,
                              held / 2**20))
    return GradModeComparison(tuple(rows), repeat, str(device))
