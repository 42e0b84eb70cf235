"""GT900-GT949: runtime codes opened in session 50, when the 8xx ranges were full (GT950 up is
another table's); silent bugs the run sees: a log whose epsilon guard drowns the gradient of a
saturated sigmoid, an in-place result used as a value."""
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
         "The run reads, in the first loss graphs, a log the loss sums unweighted, of a constant "
         "added to a sigmoid's output (or to `1 - sigmoid`), whose saved values show the "
         "sigmoid's part below 1% of "
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
    Code("GT901", "in-place-result-used-as-value",
         "an in-place op's result is used as a value in an expression, and the tensor it "
         "overwrote lives on",
         "`denom = exp_avg_var.add_(eps).sqrt()` or `flat = flat.abs_() * scale` on a view "
         "`flat = grad.reshape(n, -1)`: the expression only needs `v + eps` or `|flat|`, but "
         "the in-place spelling also writes it into the tensor, which is read again later: an "
         "optimizer's running state gets `eps` added at every step, the gradient behind the view "
         "loses its signs. Nothing fails. The run sees the in-place method call on a variable "
         "whose result is an operand of an arithmetic operator or the receiver of an "
         "out-of-place method, writing into a tensor the stepping optimizer keeps in its state "
         "(in a user-written step) or into a view of another local of the same frame, and "
         "names the statement.",
         """
         flat = grad.reshape(len(grad), -1)
         flat = (flat.abs_() * scale) ** (q - 1)
         step = flat.reshape(grad.shape) * grad.sign()
         """,
         """
         flat = grad.reshape(len(grad), -1)
         flat = (flat.abs() * scale) ** (q - 1)
         step = flat.reshape(grad.shape) * grad.sign()
         """,
         "Use the out-of-place op (`abs()`, `add(eps)`) where the value is only needed for the "
         "expression.",
         "gradtrace.runtime.trace.inplace_value", severity="warning"),
)
