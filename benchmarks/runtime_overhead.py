"""Training-step time: plain vs ``gradtrace.trace()`` vs ``torch.autograd.detect_anomaly()``.

Step time is the thread CPU time (``time.thread_time``) with torch on one thread, so other
processes on a shared machine do not distort the ratios.

Run: ``python benchmarks/runtime_overhead.py [--rounds 5] [--seconds 1.5] [--threads 1]
[--models small,mlp,cnn,transformer,reinforce]``.

Modes, interleaved round by round in one process (so machine load affects them alike):

- ``plain``: no gradtrace;
- ``trace``: ``gradtrace.trace()`` as users get it: every torch call recorded on the first 16
  optimizer steps, then on one step in N priced to cost about 3% of a step (NOTE [trace
  arming]); measured in steady state, after 28 to 64 untimed steps (past the 16 warm-up steps
  and the probe; a model whose armed step costs under about 3% more stays armed);
- ``every=1``: ``gradtrace.trace(every=1)``, every step recorded (the price of an armed step);
- ``anomaly``: ``torch.autograd.detect_anomaly()``.

Each round times as many steps as fit in ``--seconds`` of the plain step (at least 10) per
mode and takes their mean (a mean, not a median: armed steps are rare, slower ones); the table
shows the plain mean step in ms, the median over rounds of each mode's per-round ratio to plain,
and the extra microseconds per step. ``small`` is a 6-layer 128-wide MLP of batch 32;
``reinforce`` is one episode of 50 one-state forwards of a small policy per optimizer step
(pytorch/examples' REINFORCE shape).

Then ``gradtrace run`` itself: a REINFORCE script (the ``reinforce`` episode, 300 optimizer
steps) run as ``python script.py`` and as ``python -m gradtrace run script.py``, alternating,
``--rounds`` times each; the script prints the thread CPU time of its training loop, so the row
compares the loop's cost (start-up and the report at exit are left out). ``--no-run`` skips it.
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
# the cases run in subprocesses whose cwd is a temporary folder: a relative PYTHONPATH
# (`PYTHONPATH=src`) would not find this tree there and measure the installed gradtrace instead
if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
from models import MODELS  # noqa: E402

from gradtrace.runtime.pace import WARM_STEPS  # noqa: E402


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
    if name in ("trace", "every=1"):
        import gradtrace

        return gradtrace.trace(every=1 if name == "every=1" else None)
    return torch.autograd.detect_anomaly()


MODES = ("plain", "trace", "every=1", "anomaly")


def bench(model_name: str, rounds: int, seconds: float) -> dict[str, tuple[float, float]]:
    """Per mode: (mean seconds per step in the median round, median per-round ratio to plain)."""
    torch.manual_seed(0)
    model, batch_fn, loss_fn = MODELS[model_name]()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    t0 = time.thread_time()
    for _ in range(3):
        _step(model, opt, batch_fn, loss_fn)
    per = (time.thread_time() - t0) / 3
    steps = max(10, int(seconds / per))
    # trace: past its 16 warm-up steps and the probe that prices an unarmed step, into the
    # paced steady state (NOTE [trace arming]), whatever the model's speed
    warm = max(WARM_STEPS + 12, min(64, int(2.0 / per)))
    means: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(rounds):
        for mode in MODES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with _mode(mode):
                    for _ in range(warm if mode == "trace" else 8):
                        _step(model, opt, batch_fn, loss_fn)
                    t0 = time.thread_time()
                    for _ in range(steps):
                        _step(model, opt, batch_fn, loss_fn)
                    means[mode].append((time.thread_time() - t0) / steps)
    out = {}
    for mode in MODES:
        ratios = [m / p for m, p in zip(means[mode], means["plain"])]
        out[mode] = (statistics.median(means[mode]), statistics.median(ratios))
    return out


RUN_SCRIPT = """
import sys, time
sys.path.insert(0, {here!r})
import torch
from models import make_reinforce
torch.set_num_threads(1)
torch.manual_seed(0)
model, batch_fn, loss_fn = make_reinforce()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
t0 = time.thread_time()
for _ in range(300):
    states, returns = batch_fn()
    opt.zero_grad()
    loss = loss_fn(model(states), returns)
    loss.backward()
    opt.step()
print("LOOP", time.thread_time() - t0)
"""


def run_row(rounds: int) -> tuple[float, float]:
    """(plain loop seconds, median ratio) of the REINFORCE script under ``gradtrace run``."""
    import subprocess
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "reinforce_loop.py")
        with open(script, "w") as fh:
            fh.write(RUN_SCRIPT.format(here=here))

        def loop(cmd: list[str]) -> float:
            out = subprocess.run(cmd + [script], capture_output=True, text=True, cwd=tmp,
                                 check=True).stdout
            return float(next(ln for ln in out.splitlines() if ln.startswith("LOOP")).split()[1])

        plain, ratios = [], []
        for _ in range(rounds):
            p = loop([sys.executable])
            r = loop([sys.executable, "-m", "gradtrace", "run", "--quiet"])
            plain.append(p)
            ratios.append(r / p)
    return statistics.median(plain), statistics.median(ratios)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--no-run", action="store_true", help="skip the gradtrace run row")
    ns = p.parse_args(argv)
    torch.set_num_threads(ns.threads)
    print(f"torch {torch.__version__}, {ns.threads} thread(s), {ns.rounds} rounds, mean thread "
          "CPU time per step; ratio = median over rounds; +us = extra per step")
    print(f"{'model':<12}{'plain ms':>10}" + "".join(f"{m + ' x':>11}{'+us':>9}"
                                                      for m in MODES[1:]))
    for name in ns.models.split(","):
        r = bench(name, ns.rounds, ns.seconds)
        plain = r["plain"][0]
        print(f"{name:<12}{plain * 1e3:>10.3f}" + "".join(
            f"{r[m][1]:>11.3f}{(r[m][1] - 1) * plain * 1e6:>9.0f}" for m in MODES[1:]))
    if not ns.no_run:
        loop, ratio = run_row(ns.rounds)
        print(f"gradtrace run, REINFORCE script (300 episodes): plain loop {loop:.2f} s "
              f"({loop / 300 * 1e3:.2f} ms a step), under run {ratio:.3f}x "
              f"(+{(ratio - 1) * loop / 300 * 1e6:.0f} us a step, its 16 warm-up steps included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
