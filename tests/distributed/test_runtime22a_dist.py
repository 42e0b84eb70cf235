"""Session 22 (docs/triage/runtime22a.md): GT887's bypass names the call that entered the
module inside DDP from outside it, not the module's own ``self(x)`` in one of its methods
(NOTE [steps without all-reduce]); OpenTSLM's ``self._get_model().compute_loss(batch)``.
The real-world case's spelling is a trainer with ``_get_model()``; the twins here are a
trainer calling ``self.ddp.module.loss`` (two method frames deep) and bundled
the `bypass` part of spawn_silent_bugs.py (a plain call, unchanged); the look-alike trains
through the wrapper."""
from __future__ import annotations

from dist_helpers import SILENT_BUGS, marked, silent_bugs_expected


def test_bypass_through_a_method_of_the_inner_module(forkrun_once):
    """spawn_silent_bugs.py's `bypass_method` part (its three parts share one spawn): its GT887
    at the call of the inner module's method, ahead of its static twin GT453."""
    res = forkrun_once(SILENT_BUGS, parts=3)
    assert res.code == 0, res.out
    assert "bypass_method: replicas equal: False" in res.out
    assert [(f["code"], f["line"]) for f in res.findings] == silent_bugs_expected(), res.out
    assert (res.findings[2]["code"], res.findings[2]["line"]) \
        == ("GT887", marked(SILENT_BUGS, "method_bypass"))


def test_method_of_the_inner_module_under_no_grad_is_silent(forkrun_once):
    """spawn_silent.py's `method_ok` part (its four parts share one spawn)."""
    res = forkrun_once("spawn_silent.py", parts=4)
    assert res.code == 0, res.out
    assert "method_ok: replicas equal: True" in res.out
    assert "GT887" not in res.codes(), res.findings
