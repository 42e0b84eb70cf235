"""Overhead of ``gradtrace.watch(model, optimizer)`` on a training step.

Runs, in ONE process and interleaved (to cancel machine drift), plain training steps and
watched training steps of the CNN and MLP of ``benchmarks/models.py`` (the runtime
benchmark's models), and prints the median step time of each and their ratio. The ratio
judged against the goals (<= 1.03x CNN, <= 1.10x MLP) is the median over rounds of each
round's ratio, a plain block and a watched block run back to back: on a shared machine whose
speed drifts by 20% within minutes, that pairing is what keeps the ratio steady.

Time is the CPU time of the calling thread (``time.thread_time``) with torch limited to one
intra-op thread, so that other jobs on a shared machine do not distort the ratio; the wall
clock ratio is printed too.

The ``every=1`` rows price a recorded step. The ``auto`` rows price the default watch
(``every=None``: NOTE [watch pace]) in its steady state: one watch stays open on one model over
all rounds (warmed past its first 16 recorded steps), a twin model trains without it, and the
two alternate in blocks of ``--auto-steps``. ``small`` is the 6-layer 128-wide MLP of batch
32 (about 0.5 ms a step on one thread) where a fixed per-step price shows most.
``reinforce`` is runtime_overhead.py's REINFORCE episode (50 one-state forwards of a small
policy per optimizer step). ``--auto-only reinforce`` measures one default-watch row alone.

It then trains a small watched model for ``--memory-steps`` steps (10,000) and prints the
Python heap (``tracemalloc``) and the process RSS at checkpoints: bounded memory shows as flat
figures after the history has filled (it keeps at most ``history`` records, evenly thinned).

    python benchmarks/watch_overhead.py [--rounds 15] [--steps 10] [--threads 1]
                                        [--memory-steps 10000] [--json f]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch
import torch.nn as nn

import gradtrace


def _local_models() -> dict[str, Callable[[], tuple[nn.Module, Callable[[], Any], Callable]]]:
    """Fallback models when benchmarks/models.py (shared with runtime_overhead) is absent."""
    def mlp() -> tuple[nn.Module, Callable[[], Any], Callable]:
        m = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                          nn.ReLU(), nn.Linear(512, 10))
        x, y = torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,))
        return m, lambda: (x, y), nn.functional.cross_entropy

    def cnn() -> tuple[nn.Module, Callable[[], Any], Callable]:
        m = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
                          nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
        x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
        return m, lambda: (x, y), nn.functional.cross_entropy
    return {"mlp": mlp, "cnn": cnn}


def _small() -> tuple[nn.Module, Callable[[], Any], Callable]:
    layers: list[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(128, 128), nn.ReLU()]
    m = nn.Sequential(*layers, nn.Linear(128, 10))
    x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
    return m, lambda: (x, y), nn.functional.cross_entropy


try:  # the same CNN and MLP steps as benchmarks/runtime_overhead.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import MODELS  # noqa: E402
except ImportError:  # pragma: no cover - models.py is optional
    MODELS = _local_models()


def _steps(model: nn.Module, opt: torch.optim.Optimizer, batch_fn: Callable[[], Any],
           n: int, loss_fn: Callable) -> list[tuple[float, float]]:
    times = []
    for _ in range(n):
        t0, w0 = time.thread_time(), time.perf_counter()
        x, y = batch_fn()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        times.append((time.thread_time() - t0, time.perf_counter() - w0))
    return times


def _one(case: str, watched: bool, steps: int) -> list[tuple[float, float]]:
    torch.manual_seed(0)
    model, batch_fn, loss_fn = MODELS[case]()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    _steps(model, opt, batch_fn, 3, loss_fn)  # warm-up (allocator, kernels)
    if not watched:
        return _steps(model, opt, batch_fn, steps, loss_fn)
    with gradtrace.watch(model, opt, every=1):
        _steps(model, opt, batch_fn, 1, loss_fn)  # first watched step allocates buffers
        return _steps(model, opt, batch_fn, steps, loss_fn)


def measure(case: str, rounds: int, steps: int) -> dict[str, float]:
    """Median step time plain vs watched, interleaved over ``rounds``."""
    plain: list[tuple[float, float]] = []
    watched: list[tuple[float, float]] = []
    per_round: list[float] = []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {w: _one(case, w, steps) for w in order}
        plain.extend(got[False])
        watched.extend(got[True])
        per_round.append(statistics.median(c for c, _ in got[True]) /
                         statistics.median(c for c, _ in got[False]))
    p = statistics.median(c for c, _ in plain)
    w = statistics.median(c for c, _ in watched)
    pw = statistics.median(x for _, x in plain)
    ww = statistics.median(x for _, x in watched)
    return {"plain_ms": p * 1e3, "watched_ms": w * 1e3, "ratio": w / p,
            "round_ratio": statistics.median(per_round), "wall_ratio": ww / pw}


def measure_auto(case: str, rounds: int, steps: int) -> dict[str, float]:
    """Steady-state cost of the default (paced) watch: a watched model and its plain twin
    alternate in blocks of ``steps``; the ratio is the median of per-round ratios."""
    import copy

    torch.manual_seed(0)
    build = _small if case == "small" else MODELS[case]
    model, batch_fn, loss_fn = build()
    twin = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.01, momentum=0.9)
    with gradtrace.watch(model, opt) as w:
        _steps(model, opt, batch_fn, 60, loss_fn)  # past the warm-up records
        _steps(twin, twin_opt, batch_fn, 60, loss_fn)
        plain: list[float] = []
        watched: list[float] = []
        per_round = []
        for r in range(rounds):
            order = ((twin, twin_opt), (model, opt)) if r % 2 == 0 else \
                ((model, opt), (twin, twin_opt))
            got = {id(m): [c for c, _ in _steps(m, o, batch_fn, steps, loss_fn)]
                   for m, o in order}
            plain.extend(got[id(twin)])
            watched.extend(got[id(model)])
            per_round.append(statistics.fmean(got[id(model)]) / statistics.fmean(got[id(twin)]))
        every = w._bound[0].collector.every
    p, q = statistics.fmean(plain), statistics.fmean(watched)
    return {"plain_ms": p * 1e3, "watched_ms": q * 1e3, "ratio": q / p,
            "round_ratio": statistics.median(per_round), "extra_us": (q - p) * 1e6,
            "every": every}


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux
        return float("nan")


def memory(steps: int) -> list[dict[str, float]]:
    """Python heap and RSS of a watched training run at checkpoints (flat means bounded)."""
    import gc
    import tracemalloc

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()  # a loss module: the watch records the loss too
    x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
    marks = sorted({max(steps // 10, 1), max(steps // 5, 1), max(steps // 2, 1), steps})
    out = []
    tracemalloc.start()
    with gradtrace.watch(model, opt, every=1) as w:
        for i in range(1, steps + 1):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            if i in marks:
                gc.collect()
                track = w.report.tracks[0]
                out.append({"step": i, "heap_kb": tracemalloc.get_traced_memory()[0] / 1024,
                            "rss_mb": _rss_mb(), "records": len(track.steps)})
    tracemalloc.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--memory-steps", type=int, default=10_000)
    ap.add_argument("--auto-steps", type=int, default=100)
    ap.add_argument("--auto-only", metavar="CASES",
                    help="only these default-watch rows (small,mlp,cnn,reinforce)")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)
    goals = {"cnn": 1.03, "mlp": 1.10}
    results = {}
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{args.rounds} rounds x {args.steps} steps, interleaved")
    for case in ("cnn", "mlp") if not args.auto_only else ():
        res = measure(case, args.rounds, args.steps)
        res["goal"] = goals[case]
        results[case] = res
        ok = "ok" if res["round_ratio"] <= goals[case] else "OVER GOAL"
        print(f"{case}, every=1: plain {res['plain_ms']:.2f} ms/step, watched "
              f"{res['watched_ms']:.2f} ms/step (+{(res['watched_ms'] - res['plain_ms']) * 1e3:.0f}"
              f" us, median thread CPU time); ratio {res['round_ratio']:.3f}x (median of "
              f"per-round ratios; pooled medians {res['ratio']:.3f}x, wall clock "
              f"{res['wall_ratio']:.3f}x) (goal <= {goals[case]:.2f}x) {ok}", flush=True)
    auto_goals = {"small": 1.15, "mlp": 1.05, "cnn": 1.03, "reinforce": 1.15}
    for case, goal in auto_goals.items():
        if args.auto_only and case not in args.auto_only.split(","):
            continue
        steps = args.auto_steps // 5 if case == "cnn" else args.auto_steps  # 0.2 s steps
        res = measure_auto(case, args.rounds, steps)
        res["goal"] = goal
        results[f"{case}-auto"] = res
        ok = "ok" if res["round_ratio"] <= goal else "OVER GOAL"
        print(f"{case}, default watch (auto every, now {res['every']}): plain "
              f"{res['plain_ms']:.3f} ms/step, watched {res['watched_ms']:.3f} ms/step "
              f"(+{res['extra_us']:.0f} us, mean thread CPU time); ratio "
              f"{res['round_ratio']:.3f}x (median of per-round ratios) (goal <= {goal:.2f}x) "
              f"{ok}", flush=True)
    if args.memory_steps > 0:
        results["memory"] = memory(args.memory_steps)
        print(f"memory over {args.memory_steps:,} watched steps (small MLP, history 256): " +
              "; ".join(f"step {m['step']:,}: Python heap {m['heap_kb']:.0f} KB, RSS "
                        f"{m['rss_mb']:.0f} MB, {m['records']} records"
                        for m in results["memory"]), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
