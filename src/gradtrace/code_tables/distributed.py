"""GT880-GT888: what gradtrace reports about a run under ``torchrun`` (the distributed doctor).

:mod:`gradtrace.runtime.distributed.merge` builds them from what every rank recorded;
:mod:`gradtrace.runtime.distributed.ranks` also explains a DDP error message alone with them.
"""
from __future__ import annotations

from gradtrace.code_tables import Code

_REPORT = "gradtrace.runtime.distributed.merge"

CODES = (
    Code("GT880", "ddp-unused-parameters",
         "DDP parameters got no gradient in an iteration (\"Expected to have finished reduction "
         "in the prior iteration\")",
         "DistributedDataParallel waits for a gradient of every parameter before it can "
         "all-reduce; a parameter that took no part in the loss (an unused head, a skipped "
         "branch) never becomes ready, and the next iteration fails.",
         """
         model = DDP(Net(), device_ids=None)
         loss = model(x)[0].sum()  # the second output's layers are unused
         """,
         """
         model = DDP(Net(), device_ids=None, find_unused_parameters=True)
         loss = model(x)[0].sum()
         """,
         "Use every parameter in the loss, remove the unused ones, or pass "
         "`find_unused_parameters=True` (it costs a graph walk per iteration).", "gradtrace.runtime.distributed.merge_ddp"),
    Code("GT881", "ddp-rank-dependent-branch",
         "ranks used different parameters in the same iteration (a branch taken only on some "
         "ranks)",
         "A branch that depends on the rank or on the rank's data makes the ranks reduce "
         "different sets of gradients; the buckets no longer match and the run fails or hangs.",
         "out = model.a(x) if dist.get_rank() == 0 else model.b(x)",
         "out = model.a(x) + model.b(x)",
         "Take the same branches on every rank, or make the choice the same on all ranks "
         "(broadcast it).", "gradtrace.runtime.distributed.merge_ddp"),
    Code("GT882", "ddp-parameter-ready-twice",
         "a DDP parameter was marked ready twice in one backward (\"Expected to mark a variable "
         "ready only once\")",
         "The same parameter took part twice in one backward: the module was called twice with "
         "reentrant checkpointing, or shared weights were reduced twice.",
         "out = checkpoint(block, x, use_reentrant=True)  # block also runs again later",
         "out = checkpoint(block, x, use_reentrant=False)",
         "Use `use_reentrant=False` checkpointing, or `static_graph=True` when the graph is the "
         "same every iteration.", "gradtrace.runtime.distributed.merge_ddp"),
    Code("GT883", "ranks-out-of-step",
         "ranks ran different numbers of forward/backward passes or optimizer steps",
         "Collectives pair up by order: a rank that runs one more step (uneven data, a rank-"
         "dependent `continue`) waits in an all-reduce no other rank joins.",
         "loader = DataLoader(shards[rank])  # shards of different lengths",
         "loader = DataLoader(ds, sampler=DistributedSampler(ds, drop_last=True))",
         "Give every rank the same number of batches (`DistributedSampler(drop_last=True)`) or "
         "use `model.join()`.", _REPORT),
    Code("GT884", "gradients-differ-across-ranks",
         "a parameter's gradient differs across ranks after the all-reduce",
         "After the all-reduce every rank must hold the same gradients; a difference means a "
         "gradient changed after the reduction or a parameter is not reduced (a hook or an "
         "unregistered tensor).",
         "p.grad += rank_specific_noise  # after backward, before step",
         "# change gradients before DDP reduces them, or on every rank alike",
         "Modify gradients on all ranks alike, and only through DDP's hooks.", _REPORT),
    Code("GT885", "collective-failed",
         "a collective timed out or a peer closed the connection (hang or crashed rank)",
         "A collective needs every rank; when one crashed or is stuck elsewhere, the others "
         "time out or see the connection close. The first failing rank is the one to read.",
         "if rank == 0:\n    dist.all_reduce(t)",
         "dist.all_reduce(t)",
         "Read the report of the rank that failed first; call collectives on every rank in "
         "the same order.", _REPORT),
    Code("GT887", "ddp-step-without-allreduce",
         "an optimizer step applied gradients DistributedDataParallel never all-reduced",
         "DDP averages gradients only for a backward whose forward went through the wrapper "
         "outside `no_sync()`; a forward through `model.module`, or only `no_sync()` forwards "
         "before a step, leaves each rank with its own gradients and the replicas drift apart.",
         "out = model.module(x)  # model = DDP(net)\nout.sum().backward()\nopt.step()",
         "out = model(x)\nout.sum().backward()\nopt.step()",
         "Run the training forward through the DDP wrapper, with the last micro-batch before "
         "each step outside `no_sync()`.", _REPORT),
    Code("GT888", "ddp-parameter-order",
         "the DDP model's parameters differ in order (or shape) across ranks",
         "DDP pairs the ranks' gradients by position; submodules registered in a different "
         "order on some rank (a set iterated, a rank-dependent list) average one layer's "
         "gradient into another of the same shape, or fail DDP's size check.",
         "for name in set(heads):\n    self.add_module(name, nn.Linear(8, 8))",
         "for name in sorted(heads):\n    self.add_module(name, nn.Linear(8, 8))",
         "Build the model identically on every rank: a fixed registration order.", _REPORT),
    Code("GT886", "rank-did-not-report", "a rank did not report to rank 0 before the time limit",
         "Rank 0 merges what every rank saw; a rank that is stuck or was killed sends nothing, "
         "so the report is incomplete.",
         "# one rank blocked in a collective when the program ends",
         "# every rank reaches the end of the program",
         "Look at that rank's own output; raise `GRADTRACE_GATHER_TIMEOUT` if it was only slow.",
         _REPORT),
)
