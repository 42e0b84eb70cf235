"""Overhead of ``gradtrace.watch(model, optimizer, every=1)`` on a training step.

Runs, in ONE process and interleaved (to cancel machine drift), plain training steps and
watched training steps of a small ResNet-style CNN and an MLP, and prints the median step
time of each and their ratio. Goals: <= 1.03x (CNN) and <= 1.10x (MLP).

Time is the CPU time of the calling thread (``time.thread_time``) with torch limited to one
intra-op thread, so that other jobs on a shared machine do not distort the ratio; the wall
clock ratio is printed too.

    python benchmarks/watch_overhead.py [--rounds 5] [--steps 10] [--threads 1] [--json f]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable

import torch
import torch.nn as nn

import gradtrace


class Block(nn.Module):
    """A ResNet basic block."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.short(x))


def small_resnet(classes: int = 10) -> nn.Module:
    """ResNet-style CNN for 32x32 images (about 0.7 M parameters)."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes))


def mlp(classes: int = 10) -> nn.Module:
    """784 -> 3 x 512 -> 10 MLP with ReLU."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, classes))


CASES: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], int]] = {
    "cnn": (small_resnet, (32, 3, 32, 32), 32),
    "mlp": (mlp, (128, 784), 128),
}


def _steps(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
           n: int, loss_fn: nn.Module) -> list[tuple[float, float]]:
    times = []
    for _ in range(n):
        t0, w0 = time.thread_time(), time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        times.append((time.thread_time() - t0, time.perf_counter() - w0))
    return times


def _one(case: str, watched: bool, steps: int) -> list[tuple[float, float]]:
    build, shape, batch = CASES[case]
    torch.manual_seed(0)
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(*shape), torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()
    _steps(model, opt, x, y, 3, loss_fn)  # warm-up (allocator, kernels)
    if not watched:
        return _steps(model, opt, x, y, steps, loss_fn)
    with gradtrace.watch(model, opt, every=1):
        return _steps(model, opt, x, y, steps, loss_fn)


def measure(case: str, rounds: int, steps: int) -> dict[str, float]:
    """Median step time plain vs watched, interleaved over ``rounds``."""
    plain: list[tuple[float, float]] = []
    watched: list[tuple[float, float]] = []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        for w in order:
            (watched if w else plain).extend(_one(case, w, steps))
    p = statistics.median(c for c, _ in plain)
    w = statistics.median(c for c, _ in watched)
    pw = statistics.median(x for _, x in plain)
    ww = statistics.median(x for _, x in watched)
    return {"plain_ms": p * 1e3, "watched_ms": w * 1e3, "ratio": w / p,
            "wall_ratio": ww / pw}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)
    goals = {"cnn": 1.03, "mlp": 1.10}
    results = {}
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{args.rounds} rounds x {args.steps} steps, interleaved")
    for case in CASES:
        res = measure(case, args.rounds, args.steps)
        res["goal"] = goals[case]
        results[case] = res
        ok = "ok" if res["ratio"] <= goals[case] else "OVER GOAL"
        print(f"{case}: plain {res['plain_ms']:.2f} ms/step, watched {res['watched_ms']:.2f} "
              f"ms/step (thread CPU time), ratio {res['ratio']:.3f}x, wall-clock ratio "
              f"{res['wall_ratio']:.3f}x (goal <= {goals[case]:.2f}x) {ok}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
