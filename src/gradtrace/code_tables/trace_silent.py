"""GT836-GT838, GT842-GT849, GT857, GT858 (eps_underflow.py), GT862 (nonfinite.py), GT865
(events.py), GT866 (average_stats.py), GT870-GT879 (GT877: singleton.py; GT875, GT876: events.py)
and GT889-GT890: silent bugs whose run looks like ordinary training,
reported by ``gradtrace run`` / ``gradtrace.trace()`` when the trace ends (issue #13 §2; the GT8xx range of
:mod:`gradtrace.code_tables.trace`, kept apart so that table stays small)."""
from __future__ import annotations

from gradtrace.code_tables import Code
from gradtrace.code_tables.trace_silent_across import ACROSS_CODES
from gradtrace.code_tables.trace_silent_train import TRAIN_CODES

_EVENTS = "gradtrace.runtime.trace.events"
_LOSS_INPUT = "gradtrace.runtime.trace.loss_input"
_SCAN = "gradtrace.runtime.trace.graph_scan"

CODES = (
    Code("GT836", "kl-div-input-not-log-probabilities",
         "kl_div / KLDivLoss is fed probabilities (or other positive values), not log-probabilities",
         "`F.kl_div(input, target)` and `nn.KLDivLoss` take `input` as log-probabilities. Fed a "
         "softmax (the node that made the input is a softmax, through a model's last "
         "`nn.Softmax` or a helper too) or values above 0 everywhere (log-probabilities never "
         "are), the loss is not the KL divergence: it can go negative while the true KL grows, "
         "and its gradient is not the KL's. Nothing fails. The static twin of the softmax into "
         "cross_entropy / nll_loss is GT758.",
         """
         loss = F.kl_div(student_logits.softmax(-1), teacher_probs, reduction="batchmean")
         """,
         """
         loss = F.kl_div(student_logits.log_softmax(-1), teacher_probs, reduction="batchmean")
         """,
         "Give the loss `log_softmax(...)` (the target stays probabilities unless "
         "`log_target=True`).", _LOSS_INPUT, severity="warning"),
    Code("GT837", "sigmoid-into-bce-with-logits",
         "binary_cross_entropy_with_logits / BCEWithLogitsLoss is fed a sigmoid's output",
         "`binary_cross_entropy_with_logits` applies the sigmoid itself. Fed the output of a "
         "sigmoid (the node that made the input), it squashes the scores twice: its "
         "probabilities lie in [0.5, 0.73], the loss never gets near 0 and the gradient is "
         "small and wrong. Nothing fails.",
         """
         probs = torch.sigmoid(model(x))
         loss = nn.BCEWithLogitsLoss()(probs, y)
         """,
         """
         loss = nn.BCEWithLogitsLoss()(model(x), y)
         """,
         "Give the loss the raw scores; keep the sigmoid for predictions.", _LOSS_INPUT,
         severity="warning"),
    Code("GT838", "bce-input-not-probabilities",
         "binary_cross_entropy / BCELoss is fed raw scores outside [0, 1]",
         "`binary_cross_entropy` takes probabilities; on values outside [0, 1] torch raises "
         "\"all elements of input should be between 0 and 1\" at the loss. The line to change "
         "is the one (the layer) that made the input, which the run names from the input's "
         "node: a model whose last layer is not a sigmoid.",
         """
         out = model(x)  # the last layer is a Conv2d: raw scores
         loss = nn.BCELoss()(out, target)
         """,
         """
         out = model(x)
         loss = nn.BCEWithLogitsLoss()(out, target)
         """,
         "Use `binary_cross_entropy_with_logits` (`nn.BCEWithLogitsLoss`) on the raw scores, "
         "or end the model with a sigmoid.", _LOSS_INPUT),
    Code("GT842", "loss-target-broadcast",
         "a regression loss given an input and a target of different shapes",
         "`mse_loss`, `l1_loss`, `smooth_l1_loss` and `huber_loss` broadcast the input against "
         "the target: predictions of shape (B, 1) against targets of shape (B,) (or the reverse) "
         "give a (B, B) difference, every prediction compared with every target. The loss is "
         "finite and training runs, towards the batch mean. Torch warns (\"Using a target size "
         "... that is different to the input size\"); the run reports the loss call.",
         """
         pred = model(x)            # (B, 1)
         loss = F.mse_loss(pred, y)  # y: (B,)
         """,
         """
         pred = model(x).squeeze(-1)  # (B,)
         loss = F.mse_loss(pred, y)
         """,
         "Give the input and the target the same shape before the loss.", _EVENTS,
         severity="warning"),
    Code("GT858", "optimizer-eps-zero-in-dtype",
         "an adaptive optimizer's eps is 0 in its parameters' dtype, and a step wrote inf/NaN",
         "Adam, AdamW, RMSprop and Adagrad divide each update by `sqrt(v) + eps` in the "
         "parameter's dtype. For float16 parameters the default `eps=1e-8` rounds to 0, so "
         "wherever a squared gradient underflows (or is 0) the update divides by zero and the "
         "step writes inf/NaN into the weights, with finite gradients; every later loss and "
         "gradient is NaN. The run reports the optimizer's line once the weights are non-finite "
         "and the first non-finite gradient came after a step whose gradients were finite.",
         """
         model.half()
         opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
         """,
         """
         model.half()
         opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-4)
         """,
         "Give the optimizer an eps the dtype can hold (1e-4 for float16), or keep float32 "
         "weights and train with torch.autocast and a GradScaler.",
         "gradtrace.runtime.trace.eps_underflow", severity="warning"),
    Code("GT857", "non-full-backward-hook",
         "`register_backward_hook` on a module whose forward runs several autograd ops",
         "The old module backward hook is attached to the last autograd node of the module's "
         "forward: for a module with more than one op (a block, a residual, a Sequential) its "
         "`grad_input` is that node's input gradient, not the module's. A hook that reads or "
         "rescales it works on the wrong tensors, silently. Torch warns (\"Using a non-full "
         "backward hook when the forward contains multiple autograd Nodes\"); the run reports "
         "the line that registered the hook.",
         """
         block.register_backward_hook(save_grad)
         """,
         """
         block.register_full_backward_hook(save_grad)
         """,
         "Use `register_full_backward_hook`.", _EVENTS, severity="warning"),
    Code("GT843", "layer-shared-across-positions",
         "one layer object registered at several positions of a Sequential or ModuleList",
         "`[nn.Linear(d, d), nn.ReLU()] * n` or `[layer] * n` repeats one object: the n "
         "layers the container seems to hold share one weight, and model.parameters() lists "
         "it once. Nothing fails; the model is a fraction of the size it looks.",
         """
         layers = [nn.Linear(100, 100), nn.ReLU()] * 10
         model = nn.Sequential(*layers)
         """,
         """
         layers = [m for _ in range(10) for m in (nn.Linear(100, 100), nn.ReLU())]
         model = nn.Sequential(*layers)
         """,
         "Construct a new layer for each position (or copy.deepcopy one).",
         "gradtrace.runtime.trace.shared_layers", severity="warning"),
    Code("GT844", "loss-term-without-gradient",
         "a loss term without a graph, made from the model's output, is added to a live loss",
         "A term computed from the trained model's output inside `torch.no_grad()`, or "
         "through an op whose result never requires grad (`torch.histc`, a comparison, an "
         "integer cast), has no graph. Added to a loss that has one, it changes the loss value "
         "(and the logs) but never the gradient: the model trains on the other terms alone. "
         "Nothing fails.",
         """
         pred = model(x)
         with torch.no_grad():
             pred_mapped = ema_model(pred)
         loss = F.mse_loss(pred_mapped, target) + F.mse_loss(pred, y)
         """,
         """
         pred = model(x)
         pred_mapped = ema_model(pred)  # ema_model frozen by requires_grad_(False)
         loss = F.mse_loss(pred_mapped, target) + F.mse_loss(pred, y)
         """,
         "Compute the term with grad mode on (freeze the target network with "
         "requires_grad_(False) instead of no_grad), or leave it out of the loss.",
         "gradtrace.runtime.trace.dead_terms", severity="warning"),
    Code("GT862", "nan-loss-with-finite-gradients",
         "the loss is NaN, made in the forward pass, while its gradients stay finite",
         "An op of the forward pass makes NaN from inputs without NaN (`0 * -inf` where a "
         "probability of 0 meets the -inf log-probability of a padded or masked entry, `0 / 0`) "
         "and the NaN reaches the loss but no gradient: the backward of the op never uses the "
         "side that does not require grad. The parameters train on finite gradients while every "
         "loss value logged, averaged or compared (early stopping, a best checkpoint) is NaN. "
         "Nothing fails.",
         """
         logits_s = torch.cat([student(x), torch.full((len(x), 1), float("-inf"))], -1)
         with torch.no_grad():
             prob_t = F.softmax(torch.cat([teacher(x), torch.full((len(x), 1), float("-inf"))], -1), -1)
         loss = -(prob_t * F.log_softmax(logits_s, -1)).sum(-1).mean()
         """,
         """
         logits_s = torch.cat([student(x), torch.full((len(x), 1), float("-inf"))], -1)
         with torch.no_grad():
             prob_t = F.softmax(torch.cat([teacher(x), torch.full((len(x), 1), float("-inf"))], -1), -1)
         loss = -torch.where(prob_t > 0, prob_t * F.log_softmax(logits_s, -1), 0.0).sum(-1).mean()
         """,
         "Mask the non-finite entries before the op that meets them (a `where` on the "
         "product, not after it), or keep the inputs in the op's domain (an eps).",
         "gradtrace.runtime.trace.nonfinite", severity="warning"),
    Code("GT845", "function-backward-returns-none",
         "a custom autograd.Function's backward returns None for an input that requires grad",
         "backward() of a `torch.autograd.Function` returns one gradient per input of forward. "
         "None for an input that requires grad (a gradient recomputed inside backward, where "
         "grad mode is off, so `autograd.grad(..., allow_unused=True)` gives None; a `return "
         "grad, None` for a weight) means that input, and every leaf behind it, gets no "
         "gradient from the Function. Nothing fails: `.grad` stays None or misses the term.",
         """
         @staticmethod
         def backward(ctx, g):
             x, w = ctx.saved_tensors
             return g * w, None
         """,
         """
         @staticmethod
         def backward(ctx, g):
             x, w = ctx.saved_tensors
             return g * w, g * x
         """,
         "Return the gradient for every input that requires grad (compute it inside `with "
         "torch.enable_grad():` when backward needs a graph, or write the derivative out).",
         _SCAN),
    Code("GT846", "eval-mode-is-no-freeze",
         "a submodule put in eval mode to freeze it still trains",
         "`module.eval()` switches dropout and normalisation statistics; it does not stop "
         "gradients or updates. A part of the model set to eval mode (often inside a "
         "`with torch.no_grad():` block that ends before the part is called) while the rest "
         "trains, with nothing in it that eval mode changes, reads as a freeze: its parameters "
         "still get gradients and the optimizer updates them.",
         """
         with torch.no_grad():
             self.encoder.eval()
         h = self.encoder(x)
         """,
         """
         self.encoder.requires_grad_(False)
         self.encoder.eval()
         h = self.encoder(x)
         """,
         "Freeze with requires_grad_(False) (and leave it out of the optimizer), or make the "
         "call itself under torch.no_grad().",
         "gradtrace.runtime.trace.eval_freeze", severity="warning"),
    Code("GT847", "loaded-optimizer-state-discarded",
         "the optimizer state was loaded into an optimizer that is then replaced",
         "`optimizer.load_state_dict(ckpt)` fills the optimizer it is called on. Building a "
         "new optimizer over the same parameters afterwards (a helper that always constructs "
         "one, a fit() that rebuilds it) leaves the loaded moments and step counts in an "
         "object that never steps: the resumed run restarts its optimizer from zero.",
         """
         optimizer.load_state_dict(ckpt["optimizer"])
         optimizer = torch.optim.Adam(model.parameters(), lr=lr)
         """,
         """
         optimizer = torch.optim.Adam(model.parameters(), lr=lr)
         optimizer.load_state_dict(ckpt["optimizer"])
         """,
         "Build the optimizer once and load the state into the one that steps.",
         "gradtrace.runtime.trace.opt_state", severity="warning"),
    Code("GT848", "inplace-activation-rewrites-caller-input",
         "an in-place activation rewrites a tensor its caller still uses",
         "`nn.ReLU(inplace=True)` first in a block writes into the block's input. When the "
         "caller reads that tensor again after the call (a residual `out += x`), it reads the "
         "activated values: the skip connection carries relu(x), not x. Nothing fails when no "
         "op saved the tensor for backward.",
         """
         self.conv = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(c, c, 3, padding=1))
         out = self.conv(x)
         out += x
         """,
         """
         self.conv = nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))
         out = self.conv(x)
         out += x
         """,
         "Build the leading activation with inplace=False.", _EVENTS, severity="warning"),
    Code("GT849", "optimizer-holds-replaced-tensors",
         "the optimizer's tensors stopped getting gradients while backward() still runs",
         "An optimizer holds the tensor objects it was given. When the program later replaces "
         "them (`self.w = self.w.detach().to(dtype).requires_grad_()`, a model re-created, a "
         "parameter re-wrapped), the loss is computed from the new tensors: backward() fills "
         "their `.grad`, no optimizer applies it, and `step()` finds nothing on the old ones. "
         "The loss stops falling and nothing fails.",
         """
         opt = torch.optim.Adam([self.w], lr=0.01)
         self.w = self.w.detach().double().requires_grad_()
         """,
         """
         self.w = self.w.detach().double().requires_grad_()
         opt = torch.optim.Adam([self.w], lr=0.01)
         """,
         "Build the optimizer after the last replacement, or re-create it (or "
         "`add_param_group`) when the tensors are replaced.",
         "gradtrace.runtime.trace.stale_steps", severity="warning"),
    Code("GT865", "grad-of-rewritten-input",
         "autograd.grad is asked for the gradient of a tensor an in-place op rewrote into its "
         "own output",
         "An in-place op returns the tensor it wrote: `torch.autograd.grad(F.relu_(x), (x,))` "
         "differentiates `x` with respect to itself, because `x` now stands for the ReLU's "
         "output. The result is the grad_output (ones), not the op's derivative (0 where a "
         "ReLU input was negative). Nothing fails. The run sees an input of autograd.grad that "
         "is one of its outputs, written in place, and names the write.",
         """
         x = h.clone()
         g = torch.autograd.grad(F.relu_(x), (x,), grad_outputs=torch.ones_like(x))[0]
         """,
         """
         x = h.clone()
         g = torch.autograd.grad(F.relu(x), (x,), grad_outputs=torch.ones_like(x))[0]
         """,
         "Use the out-of-place op, or differentiate with respect to a tensor the write does "
         "not rebind.", _EVENTS, severity="warning"),
    Code("GT866", "average-skips-norm-statistics",
         "a mean teacher / EMA copy is averaged from the parameters only, so its "
         "normalisation statistics never move",
         "`parameters()` holds no buffers. A copy refreshed with "
         "`for p, q in zip(model.parameters(), ema.parameters()): q.mul_(d).add_(p, alpha=1 - d)` "
         "and run in eval mode keeps the running mean and variance it was made with while the "
         "trained model's move: it normalises with statistics that do not match its averaged "
         "weights, and its pseudo-labels or evaluations are off. Nothing fails. The run sees "
         "the copy's norm weights written with grad off, its running statistics never written "
         "nor updated, and a trained twin layer whose statistics moved; it names the loop.",
         """
         for p, q in zip(student.parameters(), teacher.parameters()):
             q.data.mul_(d).add_(p.data, alpha=1 - d)
         """,
         """
         for (_, p), (_, q) in zip(student.state_dict().items(), teacher.state_dict().items()):
             q.copy_(q * d + p * (1 - d) if q.is_floating_point() else p)
         """,
         "Average (or copy) the buffers too: walk `buffers()` beside `parameters()`, or pair "
         "`state_dict()` entries.", "gradtrace.runtime.trace.average_stats",
         severity="warning"),
) + TRAIN_CODES + ACROSS_CODES
