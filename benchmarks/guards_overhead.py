"""Cost of the test helpers and guards, as ratios measured in ONE process, interleaved.

* ``safe_backward(loss, opt)`` vs ``loss.backward(); opt.step(); opt.zero_grad()``
  (one host sync for the loss check; the gradient check takes one 2-norm per gradient, like
  the optimizer reads them: measured 1.0x on the CNN, 1.05x on the memory-bound MLP).
* ``@loss_guard`` / ``@requires_grad_mode`` vs the bare loss function (goal <= 1.02x).
* ``assert_gradients_flow(model, step)`` vs running the same step plainly (a test helper:
  it snapshots the model, traces the step and restores; measured 1.0x on the CNN, 1.8x on
  the MLP, whose 8 ms step is short next to snapshotting and restoring the model).

Time is the CPU time of the calling thread with torch on one intra-op thread.

    python benchmarks/guards_overhead.py [--rounds 5] [--steps 10]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import make_cnn, make_mlp  # noqa: E402

from gradtrace.guards import SafeBackward, loss_guard, requires_grad_mode  # noqa: E402
from gradtrace.testing import assert_gradients_flow  # noqa: E402


def timed(fn: Callable[[], object], steps: int) -> float:
    start = time.thread_time()
    for _ in range(steps):
        fn()
    return (time.thread_time() - start) / steps


def compare(label: str, plain: Callable[[], object], guarded: Callable[[], object],
            rounds: int, steps: int) -> None:
    plain(), guarded()  # warm up
    a, b = [], []
    for _ in range(rounds):
        a.append(timed(plain, steps))
        b.append(timed(guarded, steps))
    pa, pb = statistics.median(a), statistics.median(b)
    print(f"{label:44s} plain {pa * 1e3:8.2f} ms  guarded {pb * 1e3:8.2f} ms  "
          f"ratio {pb / pa:5.2f}x")


def bench_model(name: str, maker: Callable, rounds: int, steps: int) -> None:
    model, batch, loss_fn = maker()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    guard = SafeBackward()
    x, y = batch()

    def plain() -> None:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def guarded() -> None:
        guard(loss_fn(model(x), y), opt)

    compare(f"{name}: safe_backward", plain, guarded, rounds, steps)
    checked = requires_grad_mode(loss_guard(lambda: loss_fn(model(x), y)))
    compare(f"{name}: loss_guard + requires_grad_mode (fwd)",
            lambda: loss_fn(model(x), y), checked, rounds, steps)
    compare(f"{name}: assert_gradients_flow", plain,
            lambda: assert_gradients_flow(model, (x, lambda out: loss_fn(out, y))),
            rounds, max(1, steps // 5))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bench_model("MLP", make_mlp, args.rounds, args.steps)
    bench_model("CNN", make_cnn, args.rounds, args.steps)


if __name__ == "__main__":
    main()
