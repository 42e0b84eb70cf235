"""GT800-GT849: what ``gradtrace run`` / ``gradtrace.trace()`` report (the trace doctor).

GT800-GT819 and GT830-GT839 name a PyTorch error the run raised; the error patterns that
recognise the message live in :mod:`gradtrace.runtime.catalogue` (each names its code) and
:mod:`gradtrace.runtime.trace.diagnose` turns a match into a finding. GT820-GT829 and
GT840-GT849 never raise: :mod:`gradtrace.runtime.trace.silent` and the modules it calls report
them when the trace ends. When a static rule describes the same bug, the finding carries the rule's code instead
(``STATIC_TWINS`` in :mod:`gradtrace.runtime.catalogue`).
"""
from __future__ import annotations

from gradtrace.code_tables import Code

_DIAGNOSE = "gradtrace.runtime.trace.diagnose"
_SILENT = "gradtrace.runtime.trace.silent"
_EVENTS = "gradtrace.runtime.trace.events"

CODES = (
    Code("GT800", "backward-without-graph", "backward() on a tensor that has no grad_fn",
         "The tensor has no history: something between the parameters and the loss cut the "
         "graph (no_grad or inference_mode around the forward, grad mode switched off and left "
         "off, `.detach()`, `.data`, a number re-wrapped with `torch.tensor`, a "
         "non-differentiable op, or every parameter frozen). The finding names that line.",
         """
         out = model(x).detach()
         F.mse_loss(out, y).backward()
         """,
         """
         out = model(x)
         F.mse_loss(out, y).backward()
         """,
         "Compute the loss with grad mode on from tensors still attached to the model; keep "
         "`.detach()` and `.item()` for logging.", _DIAGNOSE),
    Code("GT801", "grad-is-none", "a .grad that is None was used (non-leaf, unused or frozen tensor)",
         "Only leaves that took part in a backward get `.grad`; it is None before the first "
         "backward, for a tensor made by an op (`w = w - lr * w.grad` makes one), for a "
         "parameter that was not used or is frozen, and after `zero_grad()` (set_to_none).",
         """
         w = w - 0.1 * w.grad
         w.grad.zero_()
         """,
         """
         with torch.no_grad():
             w -= 0.1 * w.grad
         w.grad.zero_()
         """,
         "Update leaves in place under `torch.no_grad()`, or use an optimizer; test "
         "`p.grad is not None` where a parameter may be unused.", _DIAGNOSE),
    Code("GT802", "backward-on-non-scalar", "backward() on a tensor with more than one element",
         "Without a `gradient` argument, backward() needs a single-element tensor: a loss with "
         "`reduction='none'` or the raw model output has one value per example.",
         "F.mse_loss(model(x), y, reduction='none').backward()",
         "F.mse_loss(model(x), y, reduction='none').mean().backward()",
         "Reduce first (`.mean()` or `.sum()`), or pass `gradient=torch.ones_like(t)`.", _DIAGNOSE),
    Code("GT803", "backward-through-freed-graph", "backward through a graph already freed by backward",
         "backward() frees the tensors its graph saved. A second backward reaching the same "
         "nodes fails: a hidden state carried across steps without `.detach()`, a GAN fake used "
         "by both updates, or a value computed once outside the loop.",
         """
         for x in batches:
             out, h = rnn(x, h)
             out.sum().backward()
         """,
         """
         for x in batches:
             out, h = rnn(x, h)
             h = h.detach()
             out.sum().backward()
         """,
         "Detach what crosses steps, recompute shared parts in the loop, or sum the losses and "
         "call backward once.", _DIAGNOSE),
    Code("GT804", "saved-tensor-modified-inplace", "a tensor saved for backward was changed in place",
         "Ops keep some inputs or outputs to compute their gradient and check a version counter "
         "at backward time; an in-place write in between (`+=`, `mul_`, `x[i] = ...`, "
         "`inplace=True`, or `optimizer.step()`) makes the saved value wrong, so backward stops.",
         """
         y = torch.sigmoid(x)
         y.mul_(2)
         y.sum().backward()
         """,
         """
         y = torch.sigmoid(x)
         y = y * 2
         y.sum().backward()
         """,
         "Use the out-of-place form or `.clone()` before writing; step the optimizer after "
         "every backward that needs the graph.", _DIAGNOSE),
    Code("GT805", "inplace-on-leaf", "in-place operation on a leaf tensor that requires grad",
         "With grad mode on, autograd refuses an in-place change of a leaf that requires grad "
         "(a parameter, or a tensor made with `requires_grad=True`) or of a view of it.",
         "w -= 0.1 * w.grad",
         """
         with torch.no_grad():
             w -= 0.1 * w.grad
         """,
         "Write to leaves under `torch.no_grad()`, or use `nn.init` functions.", _DIAGNOSE),
    Code("GT806", "backward-called-on-number", "backward() called on a Python/numpy number",
         "`.item()`, `float()`, `math.*` and numpy return plain numbers with no autograd "
         "history, and a number has no `backward` method.",
         "loss = F.mse_loss(model(x), y).item()\nloss.backward()",
         "loss = F.mse_loss(model(x), y)\nloss.backward()",
         "Keep the loss a tensor; call `.item()` only to log it.", _DIAGNOSE),
    Code("GT807", "numpy-on-grad-tensor", ".numpy() on a tensor that requires grad",
         "numpy cannot share memory with a tensor autograd tracks; `np.asarray(t)` and "
         "`np.array(t)` call `.numpy()` too.",
         "arr = model(x).numpy()",
         "arr = model(x).detach().cpu().numpy()",
         "Use `t.detach().cpu().numpy()` for metrics and plots.", _DIAGNOSE),
    Code("GT808", "inference-tensor-in-autograd", "an inference_mode tensor used in autograd",
         "A tensor made under `torch.inference_mode()` stays an inference tensor: it cannot be "
         "saved for backward, written in place or given requires_grad outside that mode.",
         """
         with torch.inference_mode():
             feats = encoder(x)
         head(feats).sum().backward()
         """,
         """
         with torch.no_grad():
             feats = encoder(x)
         head(feats).sum().backward()
         """,
         "Use `torch.no_grad()` where the result is reused for training, or `.clone()` it "
         "outside inference mode.", _DIAGNOSE),
    Code("GT809", "optimizer-empty-params", "optimizer built from an empty parameter list",
         "The iterable was empty: a `model.parameters()` generator already consumed, layers "
         "kept in a plain list, or a filter that kept nothing.",
         """
         params = model.parameters()
         n = len(list(params))
         opt = torch.optim.SGD(params, lr=0.1)
         """,
         """
         params = list(model.parameters())
         n = len(params)
         opt = torch.optim.SGD(params, lr=0.1)
         """,
         "Pass `model.parameters()` directly or make a list once; register layers with "
         "`nn.ModuleList`.", _DIAGNOSE),
    Code("GT810", "optimizer-non-leaf", "optimizer given a non-leaf tensor",
         "Optimizers update leaves in place; `.double()`, `.to(device)` or `.cuda()` after "
         "`requires_grad=True` returns a new non-leaf tensor, not the one that was created.",
         "w = torch.randn(3, requires_grad=True).double()\nopt = torch.optim.SGD([w], lr=0.1)",
         "w = torch.randn(3, dtype=torch.double, requires_grad=True)\n"
         "opt = torch.optim.SGD([w], lr=0.1)",
         "Create the tensor with its final dtype and device, or call `.requires_grad_()` after "
         "the conversion.", _DIAGNOSE),
    Code("GT811", "custom-function-grad-count", "custom Function.backward returns the wrong count",
         "`autograd.Function.backward` must return one gradient (or None) per input of "
         "`forward`, in order.",
         """
         @staticmethod
         def backward(ctx, g):
             a, b = ctx.saved_tensors
             return g * b
         """,
         """
         @staticmethod
         def backward(ctx, g):
             a, b = ctx.saved_tensors
             return g * b, g * a
         """,
         "Return a tuple with exactly one entry per forward input.", _DIAGNOSE),
    Code("GT812", "grad-input-unused", "autograd.grad over an input not used in the graph",
         "An input of `torch.autograd.grad` is not reachable from the outputs: unused, cut by a "
         "detach or no_grad, or a different tensor object than the one the forward used.",
         "torch.autograd.grad((a * 2).sum(), [a, b])",
         "torch.autograd.grad((a * 2).sum(), [a, b], allow_unused=True)",
         "Pass the tensor the forward really used, or `allow_unused=True` (its gradient is "
         "None).", _DIAGNOSE),
    Code("GT813", "none-result-assigned", "the None result of an in-place method was assigned back",
         "`optimizer.step()`, `zero_grad()`, `backward()` and `scheduler.step()` return None "
         "(and `load_state_dict` returns the key report), so `x = x.step()` loses the object.",
         "optimizer = optimizer.step()",
         "optimizer.step()",
         "Call the method without assigning its result.", _DIAGNOSE),
    Code("GT814", "integer-tensor-requires-grad", "requires_grad set on an integer or bool tensor",
         "Only floating point and complex tensors can require gradients: indices from "
         "argmax/max, masks and token ids cannot, and neither can an `nn.Parameter` made from "
         "one.",
         "_, idx = out.max(1)\nidx.requires_grad = True",
         "loss = criterion(out, target)",
         "Keep integer tensors plain (or buffers); learn a mask as a float Parameter.",
         _DIAGNOSE),
    Code("GT815", "non-leaf-requires-grad-changed",
         "requires_grad changed on a computed (non-leaf) tensor",
         "A tensor computed from tensors that require grad is part of the graph and its "
         "requires_grad flag cannot be changed; often the name was meant to hold a fresh leaf "
         "but a later line rebound it to a computed value.",
         "s = torch.sigmoid(x)\ns.requires_grad = True",
         "s = torch.sigmoid(x)\ns.retain_grad()",
         "Start a new leaf with `x.detach().requires_grad_()`, or `.retain_grad()` to read an "
         "intermediate's gradient.", _DIAGNOSE),
    Code("GT816", "module-attribute-rejected",
         "a plain tensor or object assigned where a module registers a Parameter or submodule",
         "`nn.Module.__setattr__` and `register_parameter` accept only an `nn.Parameter` (or "
         "None) under a parameter's name and only a module under a submodule's name, and "
         "nothing before `super().__init__()`: `self.w = F.softmax(self.w, 0)` over a "
         "Parameter, `register_parameter('w', torch.zeros(3))`.",
         "self.w = F.softmax(self.w, dim=0)  # in forward, over a Parameter",
         "w = F.softmax(self.w, dim=0)  # a local: the Parameter stays",
         "Keep the Parameter and compute into a local (or wrap a new tensor in "
         "`nn.Parameter` in `__init__`); call `super().__init__()` first.", _DIAGNOSE),
    Code("GT817", "parameter-in-two-groups", "a parameter given to two parameter groups",
         "An optimizer's parameter groups must not share a parameter: a group built from "
         "`model.parameters()` next to a group of some of the same parameters.",
         "SGD([{'params': model.parameters()}, {'params': model.head.parameters()}])",
         "head = set(model.head.parameters())\n"
         "rest = [p for p in model.parameters() if p not in head]\n"
         "SGD([{'params': rest}, {'params': list(head), 'lr': 1e-2}])",
         "Split the parameters into disjoint groups.", _DIAGNOSE),
    Code("GT818", "out-argument-error",
         "an out= argument that requires grad (a Parameter filled by out=)",
         "Functions called with `out=...` write into an existing tensor and record nothing for "
         "autograd, so PyTorch refuses them when any argument (the `out` tensor included, e.g. "
         "a Parameter being initialised) requires grad.",
         "torch.arange(1, n + 1, out=self.freq)",
         "with torch.no_grad():\n    self.freq.copy_(torch.arange(1, n + 1))",
         "Initialise parameters under `torch.no_grad()` with `copy_`/in-place init, or drop "
         "`out=` and assign the result.", _DIAGNOSE),
    Code("GT819", "legacy-function-error",
         "an autograd.Function with a non-static forward (legacy style)",
         "Since PyTorch 1.5 a custom `torch.autograd.Function` must define `forward` and "
         "`backward` as static methods taking `ctx`, and be applied with `Fn.apply(x)`; an "
         "instance called like a module (`Fn()(x)`) with a method `forward(self, x)` raises.",
         "class Rev(torch.autograd.Function):\n    def forward(self, x):\n        return x\n"
         "y = Rev()(x)",
         "class Rev(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
         "        return x.view_as(x)\ny = Rev.apply(x)",
         "Make `forward`/`backward` static methods with a `ctx` first argument (keep "
         "per-call settings on `ctx`) and call `Fn.apply(...)`.", _DIAGNOSE),
    Code("GT830", "backward-gradient-shape",
         "the gradient given to backward() does not have its output's shape",
         "`backward(gradient)`, `torch.autograd.backward(tensors, grad_tensors)` and "
         "`autograd.grad(..., grad_outputs)` take one gradient per output in that output's "
         "shape; the finding names the line that built the gradient.",
         "q = q.squeeze()\nq.backward(err.unsqueeze(1))",
         "q = q.squeeze()\nq.backward(err)",
         "Build the gradient in the output's shape (`torch.ones_like(out)`), or reduce the "
         "output to a scalar first.", _DIAGNOSE),
    Code("GT831", "optimizer-state-mismatch",
         "an optimizer state loaded before its parameter groups match the checkpoint's",
         "`optimizer.load_state_dict()` needs the parameter groups (and their sizes) of the "
         "optimizer that saved the state: a group added later with `add_param_group`, or a "
         "model changed since the save, makes it raise; the finding names the load in the "
         "function that built the optimizer (the build itself when the resume then rebinds "
         "a value the build read, such as the start epoch that chose the trainable layers).",
         "opt.load_state_dict(ckpt['optimizer'])\nopt.add_param_group({'params': loss_fn.parameters()})",
         "opt.add_param_group({'params': loss_fn.parameters()})\nopt.load_state_dict(ckpt['optimizer'])",
         "Load the state after every group is added, with the model the checkpoint came from.",
         _DIAGNOSE),
    Code("GT832", "inplace-on-forbidden-view",
         "an in-place write to a view that autograd cannot rewrite",
         "Autograd can record an in-place change to a view only by rewriting the view's own "
         "backward. It refuses for an output of a function that returns several views "
         "(`unbind`, iterating a tensor, `chunk`, `split`, and views of those), for the "
         "output of a custom `autograd.Function` (its backward would be overridden), for a "
         "view made under `no_grad` changed with grad mode on, and for `detach_()` of a view. "
         "The finding names the in-place write.",
         "for row, m in zip(img, mean):\n    row.sub_(m)",
         "img = (img - mean[:, None, None]) / std[:, None, None]",
         "Write it out of place (`t = t - m`, `torch.where`, `torch.stack` of new rows) or "
         "`.clone()` the view first; for `detach_()` use `t = t.detach()`.", _DIAGNOSE),
    Code("GT833", "hook-on-tensor-without-grad",
         "a gradient hook or retain_grad on a tensor that does not require grad",
         "`t.register_hook(...)` and `t.retain_grad()` need a tensor that autograd tracks; a "
         "tensor computed under `no_grad` (an evaluation pass running the same forward), "
         "detached, or from frozen weights and plain inputs has no gradient to hook.",
         "attn.register_hook(self.save_grad)",
         "if attn.requires_grad:\n    attn.register_hook(self.save_grad)",
         "Register the hook only when `t.requires_grad` (or `torch.is_grad_enabled()`), or run "
         "that forward with grad enabled.", _DIAGNOSE),
    Code("GT834", "grad-scaler-call-order",
         "a GradScaler call out of its per-iteration order",
         "`GradScaler` expects, per optimizer and iteration: `scale(loss).backward()`, at most "
         "one `unscale_(opt)`, `step(opt)`, then `update()`. An `update()` that only runs on "
         "one branch (skipped with the step when the gradients are not finite) leaves the "
         "optimizer unscaled, and the next iteration's `unscale_()` raises; so do a second "
         "`unscale_()` and an `unscale_()` after `step()`. The finding names the call to move.",
         "if torch.isfinite(norm):\n    scaler.step(opt)\n    scaler.update()",
         "scaler.step(opt)  # skips the update itself on inf/NaN\nscaler.update()",
         "Call `scaler.update()` once every iteration, outside any branch; `scaler.step()` "
         "already skips the optimizer step when the gradients hold inf/NaN.", _DIAGNOSE),
    Code("GT835", "optimizer-given-non-tensor",
         "an optimizer built from a module or a bare tensor instead of parameters",
         "An optimizer takes an iterable of tensors (or of parameter-group dicts): a module in "
         "the list (`Adam([layer])`) or a single tensor (`SGD(w)`) is refused. The finding "
         "names the construction, or the call that handed the value to a helper building "
         "the optimizer from its own parameter.",
         "opt = torch.optim.Adam([R], lr=0.1)",
         "opt = torch.optim.Adam(R.parameters(), lr=0.1)",
         "Pass `module.parameters()` (or `[w]` for one tensor).", _DIAGNOSE),
    Code("GT839", "torch-rejected-call",
         "the program crashed on a torch call or value that no specific diagnosis explains",
         "The run ended in an exception that torch raised (or that names a value torch made: a "
         "`.grad` that is None, the generator `parameters()` returns) and no entry of "
         "gradtrace's catalogue explains it. The finding is the error itself, torch's message "
         "shortened, at the innermost line of your code in the traceback (not inside torch), "
         "with what to change at that call when the message says it. It ranks after every "
         "specific finding of the run. Errors of your own code that torch has no part in (a "
         "missing file, a KeyError in your dict, your own `raise`) get no finding.",
         """
         params = encoder.parameters() + decoder.parameters()
         """,
         """
         params = [*encoder.parameters(), *decoder.parameters()]
         """,
         "Change the argument or value at that call as torch's message says.",
         "gradtrace.runtime.trace.crash_general"),
    Code("GT820", "parameter-without-gradient", "a trained parameter never received a gradient",
         "A parameter of the optimizer had `grad is None` after every backward: it is frozen, "
         "its module never ran, or the graph was cut before it. It never trains; the finding "
         "names the cause when the run saw it.",
         """
         loss = F.mse_loss(head(backbone(x).detach()), y)
         loss.backward()
         """,
         """
         loss = F.mse_loss(head(backbone(x)), y)
         loss.backward()
         """,
         "Remove the cut, unfreeze the parameter, or leave it out of the optimizer if it is "
         "meant to stay fixed.", _SILENT, severity="warning"),
    Code("GT821", "parameter-in-no-optimizer", "a parameter gets gradients but no optimizer uses them",
         "Gradients reach it but no optimizer holds it: the optimizer was built before the "
         "model was re-created or a layer was added, or from a subset of the parameters.",
         """
         opt = torch.optim.SGD(model.parameters(), lr=0.1)
         model.head = nn.Linear(8, 2)
         """,
         """
         model.head = nn.Linear(8, 2)
         opt = torch.optim.SGD(model.parameters(), lr=0.1)
         """,
         "Build the optimizer after the model is final, or `add_param_group` the new "
         "parameters.", _SILENT, severity="warning"),
    Code("GT822", "non-leaf-grad-read", ".grad read on a non-leaf tensor (always None)",
         "backward() fills `.grad` of leaves only; a tensor made by an op keeps `grad is None` "
         "unless `.retain_grad()` was called on it before backward.",
         "y = x * 2\ny.sum().backward()\nprint(y.grad)",
         "y = x * 2\ny.retain_grad()\ny.sum().backward()\nprint(y.grad)",
         "Read `.grad` of the leaf you created, or call `.retain_grad()` before backward.",
         _EVENTS, severity="warning"),
    Code("GT823", "gradients-accumulate-across-steps", "gradients never reset between optimizer steps",
         "backward() adds into `.grad`; without `zero_grad()` each step applies the sum of "
         "every gradient so far.",
         """
         for x, y in loader:
             F.mse_loss(model(x), y).backward()
             opt.step()
         """,
         """
         for x, y in loader:
             opt.zero_grad()
             F.mse_loss(model(x), y).backward()
             opt.step()
         """,
         "Call `optimizer.zero_grad()` once per step.", "gradtrace.runtime.trace.optimizer_events", severity="warning"),
    Code("GT824", "clip-after-step", "gradient clipping after optimizer.step() has no effect",
         "The step already used the unclipped gradients; the clip only changes gradients that "
         "`zero_grad()` will clear.",
         "loss.backward()\nopt.step()\nclip_grad_norm_(model.parameters(), 1.0)",
         "loss.backward()\nclip_grad_norm_(model.parameters(), 1.0)\nopt.step()",
         "Clip between `backward()` and `step()`.", _EVENTS, severity="warning"),
    Code("GT825", "non-finite-gradient", "NaN or Inf in a gradient",
         "A gradient reached the optimizer step with NaN or Inf, so the update writes NaN into "
         "the weights (a `torch.where` branch holding inf gives NaN gradients even where it is "
         "not selected).",
         "y = torch.where(x > 0, torch.sqrt(x), 0.0)",
         "y = torch.where(x > 0, torch.sqrt(x.clamp(min=1e-12)), 0.0)",
         "Find the op that makes inf or NaN (log or sqrt of 0, division by 0, overflow), lower "
         "the learning rate, or clip gradients.", "gradtrace.runtime.trace.optimizer_events", severity="warning"),
    Code("GT826", "graph-kept-across-steps", "a running total keeps every step's graph alive",
         "Adding a tensor that requires grad to a running total links every step's graph to "
         "the total, so memory grows each step.",
         "total += loss",
         "total += loss.item()",
         "Accumulate `loss.item()` or `loss.detach()`.", _EVENTS, severity="warning"),
    Code("GT827", "gradients-cleared-before-step",
         "gradients cleared before any optimizer step used them",
         "`zero_grad()` (or `p.grad = None`) cleared the gradients of a backward() that no "
         "`optimizer.step()` had used yet, while the same backward() line reaches a step at "
         "other passes: a step once per epoch outside the batch loop, `zero_grad()` every pass "
         "with a step every N passes, or a `zero_grad()` at the start of an epoch that drops "
         "an accumulated partial sum.",
         """
         for x, y in loader:
             opt.zero_grad()
             F.mse_loss(model(x), y).backward()
         opt.step()
         """,
         """
         for x, y in loader:
             opt.zero_grad()
             F.mse_loss(model(x), y).backward()
             opt.step()
         """,
         "Step right after the backward() calls whose gradients it should apply, and clear "
         "gradients only after that step.", "gradtrace.runtime.trace.loop_order",
         severity="warning"),
    Code("GT828", "parameters-never-change", "optimizer.step() never changes the parameters",
         "Steps ran but every parameter stayed bit-identical: a learning rate of 0, gradients "
         "that are all zero, or an optimizer over other tensors than the model's.",
         "opt = torch.optim.SGD(model.parameters(), lr=0.0)",
         "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
         "Check the learning rate and schedule, and that the optimizer holds the model's "
         "parameters.", "gradtrace.runtime.trace.optimizer_events", severity="warning"),
    Code("GT829", "optimizer-recreated", "the optimizer is re-created over the same parameters",
         "A new optimizer over the same parameters is built again and again (every epoch, every "
         "call of a training function): its state (momentum, Adam's moments and step count) "
         "starts from zero each time, so the schedule of the update is not the one intended.",
         "def train_epoch(model, data):\n    opt = torch.optim.Adam(model.parameters())\n"
         "    ...",
         "opt = torch.optim.Adam(model.parameters())\ndef train_epoch(model, data, opt):\n"
         "    ...",
         "Build the optimizer once, outside the loop or function, and pass it in.", "gradtrace.runtime.trace.optimizer_events",
         severity="warning"),
    Code("GT840", "optimizer-steps-without-gradients",
         "optimizer.step() keeps running with no gradient to apply",
         "The run looks like training but the optimizer never has a gradient: every parameter "
         "it holds is frozen while backward() runs on a loss made to require grad by hand, no "
         "backward() runs at all (an LBFGS closure that only returns the loss), or the "
         "parameters get gradients on the first steps only because `requires_grad` is switched "
         "on around `step()` and off right after it.",
         """
         def closure():
             opt.zero_grad()
             return F.mse_loss(model(x), y)
         opt.step(closure)
         """,
         """
         def closure():
             opt.zero_grad()
             loss = F.mse_loss(model(x), y)
             loss.backward()
             return loss
         opt.step(closure)
         """,
         "Call backward() before each step (inside the closure), leave trainable what should "
         "learn, and unfreeze before the forward pass, not around step().",
         "gradtrace.runtime.trace.idle", severity="warning"),
    Code("GT841", "frozen-norm-statistics-move",
         "a normalisation layer frozen by requires_grad still updates its running statistics",
         "`requires_grad=False` stops the affine weight and bias of a BatchNorm layer, not its "
         "`running_mean`/`running_var`: in train mode every forward still moves them, so the "
         "layer meant to stay fixed changes and its eval-mode output drifts.",
         """
         model.bn.requires_grad_(False)
         model.train()
         loss = F.mse_loss(model(x), y)
         """,
         """
         model.bn.requires_grad_(False)
         model.train()
         model.bn.eval()
         loss = F.mse_loss(model(x), y)
         """,
         "Put the frozen normalisation layers in eval() after every model.train().",
         "gradtrace.runtime.trace.idle", severity="warning"),
)
