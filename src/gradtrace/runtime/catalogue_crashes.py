"""Catalogue entries for errors torch raises from its own checks, outside a graph cut: views
written in place that autograd cannot rewrite, hooks on tensors without grad, anomaly mode's
NaN check, GradScaler's per-iteration protocol and optimizers given objects that are not
tensors. Part of the one catalogue (:data:`gradtrace.runtime.catalogue.PATTERNS` appends
these); torch-free. Each repro's ``# <- cause`` line is the one ``gradtrace run`` names
(:mod:`gradtrace.runtime.trace.diagnose_crash` finds it).
"""
from __future__ import annotations

from gradtrace.runtime.error_pattern import HEAD, ErrorPattern, pattern_entry

_VIEW_FIX = """Write it out of place (t = t - m; torch.where(mask, eps, t); torch.stack of new rows)
or .clone() the view before changing it."""

# entries read from the whole traceback once the crash has propagated, with no finding of their
# own when that evidence is missing (the general crash finding reports the error then)
TRACEBACK_ONLY = frozenset({"attribute-left-behind"})

CRASH_PATTERNS: tuple[ErrorPattern, ...] = (
    pattern_entry(
        "view-multi-output", r"is a view and is being modified inplace\. This view is the output "
        r"of a function that returns multiple views", "GT832",
        "an in-place write to a view returned by unbind/chunk/split",
        """Functions that return several views of one tensor (unbind, which iterating a tensor
        calls, chunk, split, and views taken of their outputs) do not let autograd record an
        in-place change to those views: `for row in img: row.sub_(m)` or
        `a, b = t.chunk(2); a[mask] = eps` on a tensor that requires grad raises.""",
        _VIEW_FIX,
        HEAD + """img = torch.rand(3, 4, 4, requires_grad=True) * 1.0
for row, m in zip(img, [0.5, 0.4, 0.3]):
    row.sub_(m)  # <- cause
"""),
    pattern_entry(
        "view-custom-function", r"is a view and is being modified inplace\. This view was "
        r"created inside a custom Function", "GT832",
        "an in-place write to the output of a custom autograd.Function",
        """The output of a custom autograd.Function (or an input it returned as-is) is a view
        whose backward is the Function's own; autograd refuses an in-place change to it
        because recording the change would override that backward. (The same message names
        BackwardHookFunction when an in-place layer follows a module with a full backward
        hook.)""",
        """Change it out of place (y = y * s) or clone the Function's output; in forward,
        return a new tensor instead of the modified input.""",
        HEAD + """class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g

y = Scale.apply(torch.randn(3, requires_grad=True) * 1.0)
y *= 2  # <- cause
y.sum().backward()
"""),
    pattern_entry(
        "view-no-grad", r"A view was created in no_grad mode and (is being modified inplace|its "
        r"base or another view of its base has been modified inplace) with grad mode enabled",
        "GT832", "a view made under no_grad is changed in place with grad mode on",
        """A view taken inside torch.no_grad() of a tensor that requires grad, and an in-place
        change (of the view or of its base) made outside the block: autograd cannot tell
        whether the change should be recorded.""",
        """Put the view and the in-place change in the same block: both under torch.no_grad()
        (weight surgery, initialisation) or both outside it.""",
        HEAD + """w = torch.randn(4, 3, requires_grad=True) * 1.0
with torch.no_grad():
    head = w[:2]
head.mul_(0.5)  # <- cause
"""),
    pattern_entry(
        "detach-view", r"Can't detach views in-place", "GT832",
        "detach_() of a view",
        """detach_() changes the tensor itself, which a view (a slice, an element of
        chunk/split/unbind, a gradient bucket view under DDP) cannot be.""",
        """Use the out-of-place t = t.detach() (a new tensor without history).""",
        HEAD + """h = torch.randn(2, 3, requires_grad=True) * 1.0
first, second = h.chunk(2)
first.detach_()  # <- cause
"""),
    pattern_entry(
        "hook-no-grad", r"cannot register a hook on a tensor that doesn't require gradient|"
        r"can't retain_grad on Tensor that has requires_grad=False", "GT833",
        "register_hook or retain_grad on a tensor that does not require grad",
        """A gradient hook (or retain_grad) needs a tensor autograd tracks. This one does not
        require grad: it was computed under torch.no_grad() (an evaluation pass running the
        same forward that registers the hook), detached, or only from frozen weights and
        plain inputs.""",
        """Register the hook only when t.requires_grad (or torch.is_grad_enabled()), or run
        that forward with grad enabled.""",
        HEAD + """layer = nn.Linear(3, 3)
grads = []

def forward(x):
    out = torch.tanh(layer(x))
    out.register_hook(grads.append)  # <- cause
    return out

forward(torch.randn(2, 3)).sum().backward()
with torch.no_grad():
    forward(torch.randn(2, 3))
"""),
    pattern_entry(
        "grad-input-no-grad", r"One of the differentiated Tensors does not require grad", "GT812",
        "torch.autograd.grad over an input that does not require grad",
        """One of the `inputs` given to torch.autograd.grad does not require grad, so there is
        no gradient to compute for it: it was detached (.detach(), .data), made under
        torch.no_grad(), or never given requires_grad=True.""",
        """Pass the tensor that was used with its graph (drop the .detach() that made the
        input), or set requires_grad=True on the input before the forward.""",
        HEAD + """emb, head = nn.Embedding(10, 4), nn.Linear(4, 1)
vec = emb(torch.tensor([1, 2, 3]))
vec = vec.detach()  # <- cause
out = head(vec).sum()
torch.autograd.grad(out, [vec])
""", twin="grad-input-unused"),
    pattern_entry(
        "anomaly-nan", r"Function '\w+' returned nan values in its \d+\w* output", "GT825",
        "anomaly mode: a backward function returned NaN",
        """Under torch.autograd.detect_anomaly() (or set_detect_anomaly(True)) backward stops at
        the first node whose gradient holds NaN. The forward line that created that node is
        the cause: sqrt or pow with an exponent below 1 at 0, 0/0, log of 0 or of a negative
        value, a NaN masked away only after it was computed.""",
        """Keep the operation's input away from its singular point (clamp(min=eps) or add eps
        before sqrt/pow/division), or mask the input before the operation rather than its
        result.""",
        HEAD + """x = torch.zeros(3, requires_grad=True)
with torch.autograd.detect_anomaly():
    root = torch.sqrt(x)  # <- cause
    (root * 0).sum().backward()
"""),
    pattern_entry(
        "scaler-order", r"unscale_\(\) has already been called on this optimizer since the last "
        r"update\(\)|unscale_\(\) is being called after step\(\)|step\(\) has already been "
        r"called since the last update\(\)", "GT834",
        "GradScaler calls out of order",
        """A GradScaler expects, per optimizer and iteration, scale(loss).backward(), at most
        one unscale_(optimizer), step(optimizer), then update(). An update() skipped on some
        iterations (inside a branch that skips the step when the gradients are not finite),
        a second unscale_() or an unscale_() after step() raises.""",
        """Call scaler.update() once every iteration outside any branch (scaler.step() already
        skips the optimizer step on inf/NaN gradients), and unscale_() once, before step().""",
        HEAD + """model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for it in range(2):
    scaler.scale(model(torch.randn(4, 2)).sum()).backward()
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if it > 0:
        scaler.step(opt)
        scaler.update()  # <- cause
    opt.zero_grad()
"""),
    pattern_entry(
        "optimizer-non-tensor", r"optimizer can only optimize Tensors, but one of the params is|"
        r"params argument given to the optimizer should be an iterable of Tensors or dicts",
        "GT835", "an optimizer given a module or a single tensor",
        """The optimizer takes an iterable of tensors or of parameter-group dicts. A module
        inside the list (Adam([layer])), a parametrized module included, or a bare tensor
        (SGD(w)) is refused.""",
        """Pass module.parameters() (for several modules, itertools.chain of them or a list of
        {'params': m.parameters()} groups), or [w] for a single tensor.""",
        HEAD + """R = nn.Linear(4, 4, bias=False)
opt = torch.optim.Adam([R], lr=0.1)  # <- cause
"""),
    pattern_entry(
        "attribute-left-behind", r"(?:have|must have) the same dtype|expected scalar type \w+ but "
        r"found \w+|Input type \([^)]*\) and (?:weight|bias) type \([^)]*\) should be the same|"
        r"expected both vectors to have same dtype|Expected all tensors to be on the same device|"
        r"is not on the expected device", "GT839",
        "two operands of one op differ in dtype or device",
        """The op got tensors of different dtypes (float and half) or devices. A frequent cause
        that the traceback hides: Module.to(), .half(), .double(), .cuda() convert the module's
        parameters and buffers only, so a tensor kept on the module as a plain attribute (a
        cached bias table, a positional encoding, a mask made in __init__ or in an overridden
        train()) keeps its dtype and device, and the forward that mixes it with the converted
        values raises.""",
        """Convert the operands to one dtype and device; a tensor kept on a module: register it
        as a buffer (self.register_buffer(name, t, persistent=False)) so that it is converted
        with the module, or rebuild it from the parameters in forward.""",
        HEAD + """class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gain = torch.ones(4)  # <- cause

    def forward(self, x):
        return self.fc(x) @ torch.diag(self.gain)

net = Scaled().double()
net(torch.randn(2, 4, dtype=torch.float64))
""", diagnosis="GT863"),
    pattern_entry(
        "ddp-frozen-module", r"DistributedDataParallel is not needed when a module doesn't have "
        r"any parameter that requires a gradient", "GT839",
        "DistributedDataParallel given a module with every parameter frozen",
        """DDP all-reduces the gradients of the parameters that require grad; a module whose
        parameters are all frozen (a perceptual loss's VGG, a teacher, a pretrained encoder) has
        none, and DDP refuses it. Wrappers that give each child its own DDP usually guard the call
        with a test on the child's parameters: a frozen child has parameters, passes the test and
        reaches DDP.""",
        """Leave frozen modules unwrapped: test any(p.requires_grad for p in m.parameters())
        before wrapping (in the wrapper's guard, or at the call).""",
        """import os
import tempfile
import torch
import torch.distributed as dist
import torch.nn as nn

class PerChildDDP(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        for name, child in list(model._modules.items()):
            if next(child.parameters(), None) is not None:  # <- cause
                model._modules[name] = nn.parallel.DistributedDataParallel(child)

if not dist.is_initialized():
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tempfile.mkdtemp(), "s"),
                            rank=0, world_size=1)
net = nn.Module()
net.body = nn.Linear(4, 4)
net.teacher = nn.Linear(4, 4).requires_grad_(False)
try:
    PerChildDDP(net)
finally:
    dist.destroy_process_group()
""", twin="ddp-wraps-frozen-module"),
)
