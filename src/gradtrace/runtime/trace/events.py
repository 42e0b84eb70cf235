"""Findings from the events the tracer noted as they happened (``TraceState.note``): one
finding per (kind, line), with how often it was seen."""
from __future__ import annotations

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.clip_target import settle
from gradtrace.runtime.trace.state import TraceState

_EVENT_TEXT = {
    "non-leaf-grad": ("GT822", ".grad read on a non-leaf tensor: it is always None because "
                      "backward() fills .grad of leaf tensors only",
                      "read .grad of the leaf you created, or call .retain_grad() before "
                      "backward()"),
    "weight-made-non-leaf": ("GT305", "this dtype/device conversion of a leaf tensor that "
                             "requires grad returns a copy on the graph (a non-leaf): the "
                             "program goes on with the copy, whose .grad stays None, while "
                             "backward() fills the .grad of the original",
                             "create the tensor with the dtype/device it needs (torch.tensor(..."
                             ", dtype=..., requires_grad=True)), or convert before setting "
                             "requires_grad"),
    "clip-after-step": ("GT824", "gradient clipping runs after optimizer.step(), so it does "
                        "not affect the update it was meant to limit",
                        "clip between loss.backward() and optimizer.step()"),
    "scheduler-before-step": ("GT515", "the learning-rate scheduler steps here before its "
                              "optimizer has stepped once, so PyTorch skips the first value of "
                              "the schedule (it warns 'Detected call of `lr_scheduler.step()` "
                              "before `optimizer.step()`')",
                              "call scheduler.step() after optimizer.step() (at the end of the"
                              " epoch or iteration)"),
    "tensor-op-result-discarded": (
        "GT708", "`{op}` returns a new tensor and leaves its input unchanged; this statement "
        "throws the result away, so the op changes nothing",
        "use the in-place `{op}_` or assign the result"),
    "clip-before-unscale": (
        "GT524", "the gradients are clipped here while still multiplied by the GradScaler's "
        "scale (no `scaler.unscale_(optimizer)` before the clip): the norm measured is the "
        "scaled one, so the clip cuts the real gradients to max_norm / scale",
        "call scaler.unscale_(optimizer) after backward() and before clipping"),
    "inplace-on-caller-input": (
        "GT848", "this in-place `{op}` rewrites the tensor its caller passed in and reads again "
        "after the call (a residual input): the caller goes on with the activated values, not "
        "its own", "build the layer with inplace=False (or clone the input before the block)"),
    # NOTE [revealing warnings] (gradtrace.runtime.trace.warned): torch warned about these
    "loss-target-broadcast": (
        "GT842", "the loss compares an input of {op}: the two broadcast against each other, so "
        "each prediction is compared with every target of the batch and the loss and its "
        "gradient are wrong (torch warns 'Using a target size ... that is different to the input "
        "size')", "give the input and the target the same shape (squeeze/unsqueeze/view the one "
        "that differs) before the loss"),
    "log-prob-per-dimension": (  # NOTE [per-dimension log-probability in the loss]
        "GT842", "this `log_prob` gives one log-probability per dimension of the sample, "
        "never summed over them: it reaches a loss whose input "
        "and target then differ ({op}) and broadcast against each other, so each prediction "
        "is compared with every dimension's value and the loss and its gradient are wrong",
        "sum it over the action dimension (`.sum(-1, keepdim=True)`), or wrap the "
        "distribution in `torch.distributions.Independent(dist, 1)`"),
    "non-full-backward-hook": (
        "GT857", "this `register_backward_hook` is on a module whose forward runs more than one "
        "autograd op: the hook receives the gradients of the module's last op only, not of its "
        "inputs, so what it reads or changes is not the module's grad_input (torch warns 'Using "
        "a non-full backward hook ...')", "use module.register_full_backward_hook(hook)"),
    "checkpoint-no-grad": (
        "GT205", "none of the inputs of this reentrant checkpoint requires grad: backward() "
        "never re-runs the segment, so the parameters inside it get no gradient (torch warns "
        "'None of the inputs have requires_grad=True')",
        "use checkpoint(..., use_reentrant=False), or pass an input that requires grad"),
    "parameters-listed-twice": (
        "GT435", "a parameter group of this optimizer lists the same tensor more than once: "
        "each step updates it once per listing (torch warns 'optimizer contains a parameter "
        "group with duplicate parameters')",
        "give each parameter once (build the list from model.parameters() once)"),
    "clip-of-consumed-generator": (
        "GT405", "gradient clipping got a parameter generator that was already used up: it "
        "clipped nothing (torch warns '`parameters` is an empty generator')",
        "pass model.parameters() anew at the clip (or keep a list: params = "
        "list(model.parameters()))"),
    "functional-dropout-in-eval": (
        "GT875", "`F.{op}` here is called without `training=`, so it keeps its default "
        "training=True and drops activations at random although its module runs in eval "
        "mode: every evaluation is noisy and two runs on the same input differ",
        "pass the module's mode, `F.{op}(x, p, training=self.training)`, or use an "
        "nn.Dropout layer"),
    "clip-not-stepped": (
        "GT876", "the gradients clipped here belong to parameters of another optimizer, not "
        "to the one stepping next: the update it makes uses gradients that were never clipped",
        "clip the parameters of the optimizer that steps (e.g. "
        "clip_grad_norm_([p for g in opt.param_groups for p in g['params']], max_norm))"),
    "grad-of-rewritten-input": (  # NOTE [input rewritten into the output]
        "GT865", "`{op}_` here rewrites its input in place and returns it, and "
        "torch.autograd.grad is then asked for the gradient of that tensor with respect to "
        "itself: the input now stands for the op's output, so the gradient is the "
        "grad_output (ones), not the derivative of `{op}`",
        "use the out-of-place op (`{op}(x)`) or differentiate with respect to a tensor the "
        "write does not rebind (`x0 = x.clone()` before it)"),
    "derivative-skips-no-grad-path": (  # NOTE [derivative through a no_grad copy of its input]
        "GT896", "grad mode is off here while `{op}` computes values from a tensor that "
        "torch.autograd.grad later differentiates with respect to, and those values still "
        "feed the output: autograd treats them as constants, so the derivative leaves every "
        "path through them out (it is not the derivative of the output)",
        "compute those values outside the grad-off block (keep only integer work such as "
        "index building under no_grad)"),
    "optimizer-state-aliases-gradient": (  # NOTE [optimizer state holding the gradient]
        "GT860", "the optimizer stores the gradient tensor itself in its state here "
        "(`state['{op}']`), not a copy, and the program writes the next gradient into the same "
        "memory (gradients zeroed in place, or accumulated): at the next step the stored value "
        "is the current gradient, so whatever the optimizer computes from the two is lost",
        "store a copy (`state['{op}'] = grad.clone()`), or clear gradients with "
        "`zero_grad(set_to_none=True)`"),
    "graph-kept": ("GT826", "a running total of a tensor that requires grad keeps every "
                   "step's graph alive (memory grows each step)",
                   "accumulate loss.item() (a float) or loss.detach() instead"),
}


def event_findings(state: TraceState, stepped: bool) -> list[Finding]:
    """The events seen; a scheduler "before the optimizer" only when an optimizer did step
    (with no optimizer step at all, the update itself is missing: a finding of its own)."""
    out: list[Finding] = []
    settle(state)  # NOTE [clip of parameters no step uses]
    for (kind, site, _), counter in state.events.items():
        text = _EVENT_TEXT.get(kind)
        if text is None or (kind == "scheduler-before-step" and not stepped):
            continue
        code, msg, fix = text
        if "{op}" in msg:
            op = counter.event.op
            msg, fix = msg.format(op=op), fix.format(op=op)
        rel: list[tuple[Site | None, str]] = list(counter.event.related)
        out.append(make(code_for(kind, code), site, msg + (f" (seen {counter.count} times)"
                                                           if counter.count > 1 else ""),
                        fix=fix, related=rel, severity="warning"))
    return out
