"""GT900-GT949: runtime codes opened in session 50, when the 8xx ranges were full (GT950 up is
another table's); silent bugs the run sees: a log whose epsilon guard drowns the gradient of a
saturated sigmoid."""
from __future__ import annotations

from gradtrace.code_tables import Code

CODES = (
    Code("GT900", "epsilon-drowns-log-gradient",
         "an epsilon inside `log(sigmoid(x) + eps)` is larger than the sigmoid's output for "
         "some elements: their gradient is practically zero",
         "`torch.log(torch.sigmoid(x) + eps)` keeps the loss finite where the sigmoid "
         "underflows, not its gradient: the derivative is `s * (1 - s) / (s + eps)`, about "
         "`s / eps` once `s` is far below `eps`, where `F.logsigmoid(x)` gives about 1. The most "
         "wrong elements (a negative item scored far above the positive one, a discriminator "
         "sure of the wrong answer) are pinned at `-log(eps)` and stop training; nothing fails. "
         "The run reads, in the first loss graphs, a log of a constant added to a sigmoid's "
         "output (or to `1 - sigmoid`) whose saved values show the sigmoid's part below 1% of "
         "the log's input for at least 1% of the elements, and names the log. Its static twin "
         "without the epsilon is GT756.",
         """
         loss = -torch.mean(torch.log(torch.sigmoid(pos - neg) + 1e-10))
         """,
         """
         loss = -torch.mean(F.logsigmoid(pos - neg))
         """,
         "Compute the log from the logits: `F.logsigmoid(x)` (`F.logsigmoid(-x)` for "
         "`log(1 - sigmoid(x))`), or `F.binary_cross_entropy_with_logits`.",
         "gradtrace.runtime.trace.drowned_log", severity="warning"),
)
