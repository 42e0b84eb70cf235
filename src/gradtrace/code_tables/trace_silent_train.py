"""GT859, GT870-GT879 (GT877: singleton.py; GT875, GT876: events.py), GT889-GT895: the silent bugs
of :mod:`gradtrace.code_tables.trace_silent` about how training steps are set up (weight decay
and per-group learning rates, evaluation gradients and train/eval modes, clipping, softmax over
a singleton dim, soft targets, weight averages, a gradient blown up by one op);
``trace_silent.CODES`` ends with them."""
from __future__ import annotations

from gradtrace.code_tables import Code

TRAIN_CODES = (
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
    Code("GT859", "frozen-extractor-dropout-active",
         "a module frozen by requires_grad runs in train mode with its dropout active",
         "`requires_grad_(False)` stops a pretrained feature extractor's weights, not its "
         "mode: the training loop's `model.train()` switches every submodule on, so the frozen "
         "part's dropout layers keep thinning its output at random. The trained head learns "
         "from features that change on every call for the same input, and meets different "
         "(eval-mode) ones later. The run sees a dropout layer run in train mode, with grad on, "
         "on an input that does not require grad, inside modules that are all in train mode and "
         "hold only parameters the program froze, while an optimizer trains other parameters, "
         "and names the call of the frozen module.",
         """
         self.upstream.requires_grad_(False)
         ...
         model.train()
         feats = self.upstream(wav)
         """,
         """
         self.upstream.requires_grad_(False)
         ...
         model.train()
         self.upstream.eval()
         feats = self.upstream(wav)
         """,
         "Put the frozen module in eval mode after every `model.train()` (or override `train()` "
         "to keep it in eval).",
         "gradtrace.runtime.trace.frozen_dropout", severity="warning"),
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
    Code("GT879", "accumulation-window-off-by-one",
         "the gradient-accumulation window starts one batch early",
         "Gradient accumulation steps once every `k` micro-batches. A condition written "
         "`i % k == 0` on a counter from 0 is true on the first batch: the first step applies "
         "one micro-batch's gradient, every later step the sum of `k`, and the micro-batches "
         "after the last multiple of `k` are never applied. Nothing fails. The run counts the "
         "backward() calls each step summed and names the `if` that guards the step. Static "
         "twin: GT536.",
         """
         for i, (x, y) in enumerate(loader):
             (loss_fn(model(x), y) / k).backward()
             if i % k == 0:
                 opt.step()
                 opt.zero_grad()
         """,
         """
         for i, (x, y) in enumerate(loader):
             (loss_fn(model(x), y) / k).backward()
             if (i + 1) % k == 0:
                 opt.step()
                 opt.zero_grad()
         """,
         "Step when `(i + 1) % k == 0`, and flush the last partial window after the loop.",
         "gradtrace.runtime.trace.windows", severity="warning"),
    Code("GT891", "closure-evaluations-summed",
         "an LBFGS closure does not clear the gradients, so its evaluations add up",
         "`LBFGS.step(closure)` calls the closure several times per step and reads `.grad` "
         "after each call. A closure that does not call `zero_grad()` before its backward() "
         "(the clearing sits after `step()`, or nowhere) adds each evaluation's gradient onto "
         "the ones before: the search direction, curvature pairs and line search use stale "
         "sums and the fit stalls or turns NaN. Nothing fails. The run sees an evaluation's "
         "backward() start inside an LBFGS step with no gradient cleared since the previous "
         "evaluation's, and names the clearing after the step (or the closure's backward()). "
         "Static twin: GT721.",
         """
         def closure():
             loss = loss_fn(model(x), y)
             loss.backward()
             return loss
         opt.step(closure)
         opt.zero_grad()
         """,
         """
         def closure():
             opt.zero_grad()
             loss = loss_fn(model(x), y)
             loss.backward()
             return loss
         opt.step(closure)
         """,
         "Call `optimizer.zero_grad()` at the top of the closure.",
         "gradtrace.runtime.trace.closure_sum", severity="warning"),
    Code("GT892", "partial-window-carried-into-next",
         "an incomplete accumulation window is carried into the next pass's first step",
         "An accumulation loop whose window restarts with each pass over the data leaves the "
         "backward() calls after its last full window in `.grad`; when the flush after the "
         "loop tests the wrong counter (the step count instead of the micro-batch index) it "
         "does not run, and the next pass's first step sums those calls with its own window. "
         "Nothing fails. The run sees steps that usually sum `k` backward() calls and one that "
         "sums more than `k` and less than `2k`, and names the clearing `if` after the loop.",
         """
         for i, (x, y) in enumerate(loader):
             (loss_fn(model(x), y) / k).backward()
             if i % k == k - 1:
                 opt.step()
                 opt.zero_grad()
         if (i // k) % k != k - 1:
             opt.zero_grad()
         """,
         """
         for i, (x, y) in enumerate(loader):
             (loss_fn(model(x), y) / k).backward()
             if i % k == k - 1:
                 opt.step()
                 opt.zero_grad()
         if i % k != k - 1:
             opt.zero_grad()
         """,
         "Test the micro-batch index in the end-of-pass flush (or step on the partial window).",
         "gradtrace.runtime.trace.windows", severity="warning"),
    Code("GT893", "gradient-blown-up",
         "one op's backward turns a gradient of ordinary size into a huge one",
         "An op whose derivative is enormous at its input (a norm of an all-zero vector guarded "
         "by a tiny eps: `x / max(||x||, 1e-12)`, a division by an eps-sized deviation) passes "
         "on a gradient 1e8 times or more larger than the one it received. Nothing is NaN and "
         "nothing fails, but the parameters below it get gradients of 1e6 and more and the "
         "update is driven by that one op. The run hunts the first backward() (as for NaN, "
         "GT825, and the one after a step saw NaN) and "
         "names the op whose backward multiplied the gradient's size by 1e8 or more, when a "
         "leaf's gradient ended up that large.",
         """
         y = F.normalize(x, dim=0)  # x may be all zeros
         """,
         """
         y = x / x.norm(dim=0).clamp_min(1e-4)  # or skip all-zero rows
         """,
         "Keep the op's input away from where its derivative explodes (a larger eps, mask the "
         "degenerate rows before the op), or clip the gradients.",
         "gradtrace.runtime.trace.nonfinite", severity="warning"),
    Code("GT894", "values-swapped-under-saved-graph",
         "a parameter's values are replaced through `.data` while a graph that saved it waits "
         "for backward",
         "`p.data = v` gives the parameter new storage without bumping its version counter. An "
         "op that saved `p` itself for its backward (a convolution's weight, `w * x`) reads "
         "the new values when the gradient is taken, so the gradient belongs to a function the "
         "forward never computed, and nothing fails. An in-place write through the alias "
         "`p.data` (`p.data.mul_(mask)`) does the same to every saved view of `p`. The run "
         "records each such write to a parameter and, at the next backward, looks for a node "
         "built before the write that saved it; it names the write, or the swap that a later "
         "restore undoes.",
         """
         saved = conv.weight.data
         conv.weight.data = saved * mask
         out = conv(x)
         conv.weight.data = saved
         out.sum().backward()
         """,
         """
         out = F.conv2d(x, conv.weight * mask)
         out.sum().backward()
         """,
         "Compute the forward with the modified weights as a separate tensor (a functional op, "
         "`torch.func.functional_call`) instead of swapping `.data`, or take the gradient "
         "before the values change.",
         "gradtrace.runtime.trace.data_swap", severity="warning"),
    Code("GT895", "unfrozen-after-last-step",
         "parameters a training loop unfreezes only after its last optimizer step",
         "A freeze schedule (a pretrained part frozen for the first epochs, unfrozen from the "
         "training loop or an epoch-end callback) whose test fires one epoch late, or not "
         "before the loop ends, leaves the part frozen at every step; nothing fails and the "
         "rest trains. The run records each switch of a Parameter from frozen to trainable "
         "and, when the program ends, reports those switched after the last step that an "
         "optimizer holds and that never had a gradient at any step, when the unfreeze ran "
         "inside the loop that steps. It names the `if` that decided when to unfreeze.",
         """
         for epoch in range(epochs):
             train_one_epoch(model, opt)
             if epoch >= freeze_epochs:  # tested before counting this epoch
                 model.encoder.requires_grad_(True)
         """,
         """
         for epoch in range(epochs):
             if epoch >= freeze_epochs:
                 model.encoder.requires_grad_(True)
             train_one_epoch(model, opt)
         """,
         "Unfreeze before the steps that should train the part: check the counter the test "
         "compares (off by one, or a threshold the run never reaches).",
         "gradtrace.runtime.trace.late_thaw", severity="warning"),
)
