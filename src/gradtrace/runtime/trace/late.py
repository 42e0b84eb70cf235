"""Silent findings of the end of a run that read the hook state and the trace state together:
an evaluation in train mode (NOTE [evaluated in train mode]) and losses kept alive after their
backward() (NOTE [losses kept alive]), an average that skips the statistics
(NOTE [average that skips the statistics]), a running total no backward() runs through
(NOTE [total never backpropagated]), an optimizer never stepped
(NOTE [optimizer cleared, never stepped]), a parameter frozen by a library call's default
(NOTE [frozen by a library call's default]), a log whose epsilon drowns a saturated
sigmoid's gradient (NOTE [epsilon that drowns a log's gradient]), an in-place result used as a
value (NOTE [in-place result used as a value]); joined here for :mod:`.silent`, which
puts a difference of a tensor with itself (NOTE [difference of a tensor with itself]) before
the dead loss terms it explains."""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.trace.average_stats import average_stats_findings
from gradtrace.runtime.trace.data_rewrite import data_rewrite_findings
from gradtrace.runtime.trace.default_freeze import default_freeze_findings
from gradtrace.runtime.trace.drowned_log import drowned_log_findings
from gradtrace.runtime.trace.eval_in_train import train_eval_findings
from gradtrace.runtime.trace.hooks import param_name
from gradtrace.runtime.trace.inplace_value import inplace_value_findings
from gradtrace.runtime.trace.kept_losses import kept_loss_findings
from gradtrace.runtime.trace.never_stepped import never_stepped_findings
from gradtrace.runtime.trace.no_step import no_step_findings
from gradtrace.runtime.trace.self_diff import self_diff_findings
from gradtrace.runtime.trace.unused_total import unused_total_findings
from gradtrace.runtime.trace.zero_diff import zero_diff_findings


def late_findings(state: Any, data: Any) -> list[Finding]:
    return train_eval_findings(data, state) + unused_total_findings(state) \
        + kept_loss_findings(state) \
        + average_stats_findings(state, data) + zero_diff_findings(state) \
        + data_rewrite_findings(state) + never_stepped_findings(state, data) + no_step_findings(state, data) \
        + default_freeze_findings(state, data, param_name) \
        + drowned_log_findings(state, data) + inplace_value_findings(state)


__all__ = ["late_findings", "self_diff_findings"]
