"""GT45x: DistributedDataParallel (static part: what the code shows about the wrapper).

The rules live in :mod:`.reducer` (GT450 unused layer, GT451 data-dependent branch, GT452
freeze after wrapping) and :mod:`.sync` (GT453 forward through ``.module``, GT454 a loss
normalised over all ranks and averaged again), :mod:`.skips` (GT455 a step one rank skips),
:mod:`.frozen_wrap` (GT456 a module frozen when it is built, wrapped), :mod:`.late_sync_flag`
(GT542 the sync flag set between a forward and its backward);
shared facts in :mod:`._ddp` (NOTE [ddp facts]).
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("a rank-dependent skip of the step that the file does not raise itself (an early "
     "`return`, a `continue` on a condition of the batch) or a branch taken on some ranks "
     "only, in a model wrapped in another file",
     "which ranks take which path is only known at run time; see runtime: torchrun -m "
     "gradtrace run (docs/distributed.md)"),
]
