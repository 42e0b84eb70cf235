"""Session 22 (docs/triage/runtime22a.md): GT887's bypass names the call that entered the
module inside DDP from outside it, not the module's own ``self(x)`` in one of its methods
(NOTE [steps without all-reduce]); OpenTSLM's ``self._get_model().compute_loss(batch)``.
The real-world case's spelling is a trainer with ``_get_model()``; the twins here are a
trainer calling ``self.ddp.module.loss`` (two method frames deep) and bundled
``spawn_bypass.py`` (a plain call, unchanged); the look-alike trains through the wrapper."""
from __future__ import annotations

from dist_helpers import marked


def test_bypass_through_a_method_of_the_inner_module(forkrun):
    res = forkrun("spawn_bypass_method.py", world=1)
    assert res.code == 0, res.out
    assert "replicas equal: False" in res.out
    assert res.codes()[:1] == ["GT887"], res.out
    assert res.findings[0]["line"] == marked("spawn_bypass_method.py", "bypass")


def test_method_of_the_inner_module_under_no_grad_is_silent(forkrun_once):
    """spawn_silent.py's `method_ok` part (its four parts share one spawn)."""
    res = forkrun_once("spawn_silent.py", parts=4)
    assert res.code == 0, res.out
    assert "method_ok: replicas equal: True" in res.out
    assert "GT887" not in res.codes(), res.findings
