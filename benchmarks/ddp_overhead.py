"""Overhead of gradtrace on a 2-process DistributedDataParallel training step (CPU, gloo).

Spawns 2 ranks (torch.multiprocessing, gloo on 127.0.0.1); each wraps the MLP and the
ResNet-style CNN of ``models.py`` in DDP and runs, interleaved in one run, plain steps, steps
under ``gradtrace.trace()`` alone ("trace-only"), under it plus the rank session that
``gradtrace run`` adds under torchrun ("trace": DDP bookkeeping hooks, heartbeat thread), and
the same with ``--check-sync 10`` (one flat all_reduce of per-parameter checksums every 10
steps). Prints the median seconds per step and
ratios to plain, as seen by rank 0: the CPU time of the training thread (robust to other
jobs on a shared machine; a rank blocked in gloo's all-reduce does not burn CPU) and the wall
clock. Also checks that 20 steps give bitwise-equal parameters with and without gradtrace.

    python benchmarks/ddp_overhead.py [--rounds 5] [--steps 10] [--json out.json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import sys
import time
import warnings
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MODELS  # noqa: E402

MODES = ("plain", "trace-only", "trace", "trace+sync10")


@contextlib.contextmanager
def _mode(name: str) -> Any:
    if name == "plain":
        yield
        return
    import gradtrace
    from gradtrace.runtime.distributed.ranks import rank_session

    if name == "trace-only":  # the single-process tracer alone, for comparison
        with gradtrace.trace():
            yield
        return
    with gradtrace.trace() as tr, rank_session(tr, check_sync=10 if "sync" in name else 0):
        yield


def _step(model: Any, opt: Any, batch_fn: Any, loss_fn: Any) -> None:
    x, y = batch_fn()
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    loss.item()


def _bench(name: str, steps: int, rounds: int) -> dict[str, dict[str, float]]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model, batch_fn, loss_fn = MODELS[name]()
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):
        _step(model, opt, batch_fn, loss_fn)
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(rounds):
        for mode in MODES:
            with warnings.catch_warnings(), _mode(mode):
                warnings.simplefilter("ignore")
                _step(model, opt, batch_fn, loss_fn)
                for _ in range(steps):
                    t0, c0 = time.perf_counter(), time.thread_time()
                    _step(model, opt, batch_fn, loss_fn)
                    cpu[mode].append(time.thread_time() - c0)
                    wall[mode].append(time.perf_counter() - t0)
    return {"cpu": {m: statistics.median(v) for m, v in cpu.items()},
            "wall": {m: statistics.median(v) for m, v in wall.items()}}


def _train_bits(traced: bool) -> list[bytes]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(1)
    model, batch_fn, loss_fn = MODELS["mlp"]()
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    with _mode("trace+sync10" if traced else "plain"):
        for _ in range(20):
            _step(model, opt, batch_fn, loss_fn)
    return [p.detach().numpy().tobytes() for p in model.parameters()]


def _worker(rank: int, port: int, args: argparse.Namespace, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    results = {name: _bench(name, args.steps, args.rounds) for name in args.models}
    same = _train_bits(False) == _train_bits(True)
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump({"results": results, "bitwise_equal": same}, fh)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=sorted(MODELS))
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ddp_overhead_{os.getpid()}.json")
    mp.spawn(_worker, args=(_free_port(), args, out), nprocs=2, join=True)
    with open(out, encoding="utf-8") as fh:
        data = json.load(fh)
    os.unlink(out)
    print(f"{'model':<8} {'clock':<5} " + " ".join(f"{m:>14}" for m in MODES)
          + "   ratios to plain")
    for name, both in data["results"].items():
        for clock in ("cpu", "wall"):
            res = both[clock]
            ratios = " ".join(f"{res[m] / res['plain']:.3f}x" for m in MODES[1:])
            print(f"{name:<8} {clock:<5} " + " ".join(f"{res[m] * 1e3:>12.2f}ms" for m in MODES)
                  + f"   {ratios}")
    print(f"parameters after 20 steps bitwise equal with/without gradtrace: "
          f"{data['bitwise_equal']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
    return 0 if data["bitwise_equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
