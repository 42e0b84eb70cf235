"""GT900-GT949: runtime codes opened in session 50, when the 8xx ranges were full (GT950 up is
another table's); silent bugs the run sees: a log whose epsilon guard drowns the gradient of a
saturated sigmoid, an in-place result used as a value, a difference of a tensor with itself."""
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
    Code("GT902", "difference-of-tensor-with-itself",
         "a difference subtracts a tensor from another name for the same memory (itself, or a "
         "view of all of it): it is zero everywhere",
         "`cur = saved[:n]` with `n = len(saved)`, then `(cur - saved) ** 2`: the slice is the "
         "whole tensor, so every element is subtracted from itself and the penalty is always "
         "zero, with no gradient to anything (an EWC or L2-SP anchor that slices or aliases the "
         "saved copy instead of the current parameter, `p - p_old` with `p_old = p` kept without "
         "a copy). Nothing fails; the regulariser is off. The run sees a `sub` on the user's line "
         "whose operands are the same tensor or views of one base with the same shape, strides "
         "and address and the same `requires_grad` (`x - x.detach()` is left alone), and names "
         "the statement that bound the view (else the difference).",
         """
         cur_param = saved_param[:n_units]
         penalty = (imp * (cur_param - saved_param) ** 2).sum()
         """,
         """
         cur_param = cur_param[:n_units]
         penalty = (imp * (cur_param - saved_param) ** 2).sum()
         """,
         "Subtract the tensor that is meant (the current parameter, a copy saved with "
         "`.detach().clone()`).",
         "gradtrace.runtime.trace.self_diff", severity="warning"),
    Code("GT913", "no-optimizer-ever-steps",
         "backward() fills the gradients of an optimizer pass after pass and no optimizer "
         "ever steps: the weights never change",
         "A learning-rate scheduler's `step()` called where the optimizer's belongs, or an "
         "accumulation condition `(step + 1) % accum == 0` that never holds because an epoch "
         "has fewer batches than the period: `backward()` runs, `.grad` fills, and no "
         "`optimizer.step()` ever runs, so the model ends where it started and nothing fails. "
         "The run sees no crash, three or more `backward()` calls, optimizers built while "
         "tracing and none stepped, one holding a tensor with a gradient; it names the `if` "
         "guarding that optimizer's `step()`, else another `step()` after the last backward "
         "in its function, else that backward. A file that reads a `.grad` is left alone.",
         """
         for x, y in loader:
             optimizer.zero_grad()
             criterion(model(x), y).backward()
             scheduler.step()
         """,
         """
         for x, y in loader:
             optimizer.zero_grad()
             criterion(model(x), y).backward()
             optimizer.step()
         scheduler.step()
         """,
         "Call `optimizer.step()` after the backward; make an accumulation condition also "
         "hold on an epoch's last batch.",
         "gradtrace.runtime.trace.no_step", severity="warning"),
)
