"""GT836-GT838, GT842-GT849, GT857, GT858 (eps_underflow.py), GT862 (nonfinite.py), GT870-GT879 (GT877: singleton.py;
GT875, GT876: events.py) and GT889-GT890: silent bugs whose run looks like ordinary training,
reported by ``gradtrace run`` / ``gradtrace.trace()`` when the trace ends (issue #13 §2; the GT8xx range of
:mod:`gradtrace.code_tables.trace`, kept apart so that table stays small)."""
from __future__ import annotations

from gradtrace.code_tables import Code

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
         "gradtrace.runtime.trace.idle", severity="warning"),
    Code("GT870", "decayed-without-gradient",
         "weight decay moves a parameter whose gradient is always zero",
         "An optimizer steps every parameter that has a `.grad`, and weight decay shrinks it "
         "whatever the gradient holds. A parameter 'frozen' by zeroing its gradient (a hook "
         "returning zeros, `p.grad.zero_()`, `p.grad = torch.zeros_like(p)`) still decays "
         "towards 0 at every step: it is neither frozen nor trained. The run sees a gradient "
         "that is exactly 0 at every checked step and a step that changed the parameter "
         "anyway, and names where the optimizer was built.",
         """
         p.register_hook(lambda g: torch.zeros_like(g))
         opt = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=1e-4)
         """,
         """
         p.requires_grad_(False)
         opt = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=1e-4)
         """,
         "Freeze with `requires_grad_(False)` (optimizers skip parameters without a gradient), "
         "leave the parameter out of the optimizer, or give it a group with `weight_decay=0`.",
         "gradtrace.runtime.trace.applied", severity="warning"),
    Code("GT871", "group-learning-rates-erased",
         "the per-group learning rates the optimizer was built with are overwritten by one value",
         "An optimizer built with a learning rate per parameter group (a backbone at lr/10, a "
         "head at lr) trains each group at its own rate. A helper that writes one value into "
         "every group (`for g in opt.param_groups: g['lr'] = lr`) erases the ratio: the "
         "backbone trains as fast as the head. Nothing fails. The run compares the rates asked "
         "for at construction with those at the first step.",
         """
         opt = torch.optim.Adam([{"params": backbone, "lr": lr / 10}, {"params": head}], lr=lr)
         for g in opt.param_groups:
             g["lr"] = lr
         """,
         """
         opt = torch.optim.Adam([{"params": backbone, "lr": lr / 10}, {"params": head}], lr=lr)
         for g, base in zip(opt.param_groups, (lr / 10, lr)):
             g["lr"] = base
         """,
         "Scale each group's own rate (keep a base rate per group), or use a scheduler.",
         "gradtrace.runtime.trace.lr_groups", severity="warning"),
    Code("GT872", "aliased-parameters-stepped-twice",
         "two parameter objects over the same memory are both in one optimizer",
         "An optimizer tells parameters apart by identity. Two distinct `Parameter` objects "
         "that view the same memory (`load_state_dict(..., assign=True)` of a model with tied "
         "weights, a tie written as `dec.weight.data = enc.weight.data`) are two entries: "
         "each gets its own gradient and each step updates the shared values twice, with two "
         "sets of optimizer state. Nothing fails. The run groups an optimizer's parameters "
         "by memory at its first checked step; plain SGD without weight decay (where two "
         "updates equal one with the summed gradient) is left alone.",
         """
         dec.weight.data = enc.weight.data
         opt = torch.optim.Adam(model.parameters(), lr=1e-3)
         """,
         """
         dec.weight = enc.weight
         opt = torch.optim.Adam(model.parameters(), lr=1e-3)
         """,
         "Tie by sharing the Parameter object, load without `assign=True`, or re-tie after "
         "loading.", "gradtrace.runtime.trace.aliased", severity="warning"),
    Code("GT873", "evaluation-gradients-applied",
         "gradients of backward() calls made during an evaluation are applied by the next step",
         "A loss helper that calls backward() itself and steps only when given an optimizer "
         "(`SimpleLossCompute(generator, criterion, opt=None)` in validation) still runs "
         "backward() on the validation batches. Nothing clears those gradients when the "
         "training loop zeroes after its step, so the first training step of the next epoch "
         "applies them: the model trains on the evaluation data. The run sees an optimizer "
         "step that sums more backward() calls than its steps usually do, some of them after "
         "forward passes in eval mode, and names that backward() line.",
         """
         loss.backward()
         if self.opt is not None:
             self.opt.step()
             self.opt.zero_grad()
         """,
         """
         if self.opt is not None:
             loss.backward()
             self.opt.step()
             self.opt.zero_grad()
         """,
         "Call backward() only when training (compute evaluation losses under "
         "`torch.no_grad()`), or zero the gradients before each training step.",
         "gradtrace.runtime.trace.windows", severity="warning"),
    Code("GT874", "evaluated-in-train-mode",
         "a trained model is evaluated while still in train mode",
         "A validation or test loop run with grad off over a model that was never put in "
         "`eval()` normalises every batch with its own statistics and writes them into the "
         "BatchNorm running mean and variance: the figures depend on the batch, and the "
         "evaluated data changes the statistics the model keeps (and trains on next). "
         "`no_grad` only stops gradients; it does not switch the mode. The run sees a trained "
         "norm layer run in train mode with grad off, over several batches, with no backward() "
         "in between, and names the line that evaluates the model inside the grad-off block. "
         "A model with dropout evaluated in train mode (grad on or off) keeps dropping units "
         "at random: the run sees a dropout layer that fed training run twice or more in a "
         "row, between optimizer steps, with outputs no backward() reaches, and names the loop "
         "over the evaluated batches.",
         """
         def validate(model, loader):
             with torch.no_grad():
                 return [loss_fn(model(x), y).item() for x, y in loader]
         """,
         """
         def validate(model, loader):
             model.eval()
             with torch.no_grad():
                 return [loss_fn(model(x), y).item() for x, y in loader]
         """,
         "Call `model.eval()` before evaluating and `model.train()` before training again.",
         "gradtrace.runtime.trace.eval_in_train", severity="warning"),
    Code("GT875", "functional-dropout-in-eval",
         "a functional dropout without `training=` keeps dropping after model.eval()",
         "`F.dropout(x, p)` (and dropout1d/2d/3d, feature_alpha_dropout) defaults to "
         "`training=True`: unlike `nn.Dropout` it does not read the module's mode, so a "
         "forward that leaves `training` out drops activations at random in eval mode too, "
         "and evaluation and inference are noisy. Nothing fails. The run sees the call drop "
         "(p > 0) from the program's own line, with no `training` argument written at that "
         "call, while the module whose forward runs it is in eval mode, and names the call. "
         "An explicit `training=True` (Monte-Carlo dropout) stays silent.",
         """
         def forward(self, x):
             return F.dropout(self.fc(x), p=self.p)
         """,
         """
         def forward(self, x):
             return F.dropout(self.fc(x), p=self.p, training=self.training)
         """,
         "Pass `training=self.training`, or use an `nn.Dropout` layer.",
         "gradtrace.runtime.trace.events", severity="warning"),
    Code("GT876", "clip-not-stepped",
         "the gradients clipped are not those of the optimizer that steps next",
         "`clip_grad_norm_(params, max_norm)` limits the gradients of `params` only. A "
         "program with two models or heads (actor and critic, generator and discriminator) "
         "that clips one head's parameters right before stepping the other's optimizer clips "
         "nothing that update reads: the stepped gradients are never limited, and nothing "
         "fails. The run notes which gradient tensors each clipping line changed between a "
         "backward() and the next one, and names a line none of whose gradients any "
         "optimizer step held while another optimizer, seen stepping before, holds them.",
         """
         pi_loss.backward()
         clip_grad_norm_(self.critic.parameters(), max_norm)
         self.pi_optimizer.step()
         """,
         """
         pi_loss.backward()
         clip_grad_norm_(self.actor.parameters(), max_norm)
         self.pi_optimizer.step()
         """,
         "Clip the parameters of the optimizer that steps.",
         "gradtrace.runtime.trace.events", severity="warning"),
    Code("GT877", "softmax-over-singleton-dim-at-run-time",
         "a softmax runs over a dimension of size one on every call: its weights are all 1.0",
         "A softmax (or log_softmax) over a dimension of size 1 gives exactly 1.0 (0.0) for "
         "every entry whatever the scores, and its gradient into the scores is exactly 0: the "
         "layer that makes them (an attention scorer `nn.Linear(d, 1)`, a `Conv1d(c, 1, 1)`) "
         "never trains, and nothing fails. The run reads the shape of each softmax input that "
         "requires grad and names the line whose every call was over a size-one dim (a line "
         "also seen over more entries, such as a one-element last batch, is data). The static "
         "twin is GT762.",
         """
         scores = self.score(h)              # [B, T, 1]
         weights = scores.softmax(dim=-1)    # all 1.0
         """,
         """
         scores = self.score(h)              # [B, T, 1]
         weights = scores.softmax(dim=1)     # over the T positions
         """,
         "Normalise over the positions' dimension, or use a sigmoid for one independent "
         "score per entry.", "gradtrace.runtime.trace.singleton", severity="warning"),
    Code("GT878", "soft-target-not-detached",
         "the softmax target of a soft-label loss is not detached, so the loss trains its network",
         "A distillation or soft-label loss (`-(p * log_softmax(s)).sum(-1)`, `kl_div`, "
         "`cross_entropy` with probabilities as target) treats the teacher's probabilities as "
         "a target. When they are not detached, backward() also sends the loss's gradient "
         "into the network that made them, and its optimizer steps it towards the student: "
         "the target moves, and a teacher trained on its own loss gets a wrong gradient. "
         "Nothing fails. The run walks the first loss graphs and reports a softmax multiplied "
         "by log-probabilities when it reaches trained tensors the log-probabilities do not "
         "(an entropy term over one set of logits is left alone).",
         """
         teacher_probs = F.softmax(teacher_logits, dim=-1)
         kd = -(teacher_probs * F.log_softmax(student_logits, -1)).sum(-1).mean()
         """,
         """
         teacher_probs = F.softmax(teacher_logits, dim=-1).detach()
         kd = -(teacher_probs * F.log_softmax(student_logits, -1)).sum(-1).mean()
         """,
         "Detach the target (`.detach()`, or compute it under `torch.no_grad()`).",
         "gradtrace.runtime.trace.soft_target", severity="warning"),
    Code("GT889", "decay-groups-inverted",
         "the weight-decay groups are the wrong way round: 1-D tensors decayed, matrices not",
         "A program that splits its parameters into a group with weight decay and one without "
         "means to exempt the biases and norm weights (1-D) and to decay the weight matrices "
         "and embeddings. When every trained tensor of the decayed groups is 1-D and every one "
         "without decay has two dimensions or more, the split is inverted (the two branches of "
         "a name test swapped): the norm scales shrink towards 0 and the matrices are never "
         "regularised. Nothing fails. The run reads the groups of each optimizer that stepped.",
         """
         if any(nd in n for nd in ["bias", "LayerNorm.weight"]):
             decay.append(p)
         else:
             no_decay.append(p)
         """,
         """
         if any(nd in n for nd in ["bias", "LayerNorm.weight"]):
             no_decay.append(p)
         else:
             decay.append(p)
         """,
         "Swap the groups: decay the tensors with two dimensions or more, give the biases and "
         "norm weights `weight_decay=0`.", "gradtrace.runtime.trace.decay_groups",
         severity="warning"),
    Code("GT890", "average-updated-between-steps",
         "a moving average of the weights is updated more often than the optimizer steps",
         "An exponential moving average of the parameters (EMA model, mean teacher) is meant to "
         "follow the trained weights once per optimizer step. Updated once per micro-batch of "
         "a gradient accumulation, or at every iteration while the optimizer steps every few, "
         "most updates average the same weights again: the average moves several times per "
         "step, its decay per step is `d ** k` instead of `d`. Nothing fails. The run follows "
         "the first parameters averaged in place (`add_`/`lerp_` towards an `nn.Parameter`) and "
         "reports an average whose updates mostly find the weights unchanged since the previous "
         "one, at the update's call in the function that steps the optimizer.",
         """
         loss.backward()
         if (i + 1) % accum == 0:
             optimizer.step()
             optimizer.zero_grad()
         ema.update(model)
         """,
         """
         loss.backward()
         if (i + 1) % accum == 0:
             optimizer.step()
             optimizer.zero_grad()
             ema.update(model)
         """,
         "Update the average once per optimizer step, in the branch that steps.",
         "gradtrace.runtime.trace.ema_reads", severity="warning"),
)
