"""Median training-step time: plain vs ``gradtrace.trace()`` vs ``torch.autograd.detect_anomaly()``.

Step time is the thread CPU time (``time.thread_time``) with torch on one thread, so other
processes on a shared machine do not distort the ratios.

Run: ``python benchmarks/runtime_overhead.py [--steps 30] [--rounds 5] [--threads 1]``.
The three modes are interleaved round by round in one process (so machine load affects them
alike); each round times ``--steps`` steps per mode; the table shows the median step time and
the ratio to plain. Each mode runs ``warmup`` untimed steps first: gradtrace checks gradients
for NaN/Inf and snapshots parameter state on steps 1-4 and on powers of two, so its first steps
cost more than the steady state measured here.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MODELS  # noqa: E402


def _step(model, opt, batch_fn, loss_fn) -> None:
    x, y = batch_fn()
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    loss.item()


def _mode(name: str):
    if name == "plain":
        return contextlib.nullcontext()
    if name == "trace":
        import gradtrace

        return gradtrace.trace()
    return torch.autograd.detect_anomaly()


def bench(model_name: str, steps: int, rounds: int, warmup: int = 8) -> dict[str, float]:
    """Median seconds per step for each mode."""
    torch.manual_seed(0)
    model, batch_fn, loss_fn = MODELS[model_name]()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):
        _step(model, opt, batch_fn, loss_fn)
    times: dict[str, list[float]] = {"plain": [], "trace": [], "anomaly": []}
    for _ in range(rounds):
        for mode in times:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with _mode(mode):
                    for _ in range(warmup):  # gradtrace checks more on its first steps
                        _step(model, opt, batch_fn, loss_fn)
                    for _ in range(steps):
                        t0 = time.thread_time()
                        _step(model, opt, batch_fn, loss_fn)
                        times[mode].append(time.thread_time() - t0)
    return {m: statistics.median(v) for m, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--models", default=",".join(MODELS))
    ns = p.parse_args(argv)
    torch.set_num_threads(ns.threads)
    print(f"torch {torch.__version__}, {ns.threads} thread(s), {ns.rounds} rounds x {ns.steps} "
          "steps per mode, median thread CPU time per step")
    print(f"{'model':<12}{'plain ms':>10}{'trace ms':>10}{'trace x':>9}{'anomaly ms':>12}"
          f"{'anomaly x':>11}")
    for name in ns.models.split(","):
        r = bench(name, ns.steps, ns.rounds)
        print(f"{name:<12}{r['plain'] * 1e3:>10.2f}{r['trace'] * 1e3:>10.2f}"
              f"{r['trace'] / r['plain']:>9.3f}{r['anomaly'] * 1e3:>12.2f}"
              f"{r['anomaly'] / r['plain']:>11.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
