"""The error catalogue: which autograd errors gradtrace recognises, what they mean, how to fix.

Torch-free on purpose: the CLI (``gradtrace explain "<error text>"``) imports it at startup.
Patterns match on *stable prefixes* of the messages (they change across torch releases, see
pytorch-facts.md#message-prefixes). Every :class:`ErrorPattern` carries a ``repro`` (a tiny script
that raises the error on the installed torch): the test-suite runs each one, checks that the regex
matches the real message and that ``gradtrace run`` names the line marked ``# <- cause``."""
from __future__ import annotations

import re

from gradtrace.codes import TABLE
from gradtrace.findings import Finding
from gradtrace.runtime.catalogue_crashes import CRASH_PATTERNS
from gradtrace.runtime.error_pattern import HEAD as _HEAD
from gradtrace.runtime.error_pattern import STATIC_TWINS, ErrorPattern
from gradtrace.runtime.error_pattern import pattern_entry as _p

__all__ = ["STATIC_TWINS", "ErrorPattern", "PATTERNS", "explain_message", "match_message",
           "match_partial", "pattern"]

PATTERNS: tuple[ErrorPattern, ...] = (
    _p("element0", r"element 0 of tensors does not require grad and does not have a grad_fn",
       "GT800", "backward() on a tensor that is not connected to any parameter",
       """The tensor you call backward() on has no grad_fn and does not require grad, so autograd
       has nothing to differentiate. Something between the parameters and the loss cut the graph:
       the loss (or an input of it) was computed under torch.no_grad()/inference_mode, grad mode
       was switched off with torch.set_grad_enabled(False) and never switched back on, a value was
       detached (.detach(), .data, .item() re-wrapped with torch.tensor(...)), a non-differentiable
       op (argmax, comparison, integer cast) produced it, or every parameter is frozen.""",
       """Compute the loss with grad mode on, from tensors that are still attached to the model;
       keep .item()/.detach() for logging, and re-enable grad (torch.set_grad_enabled(True)).""",
       _HEAD + """m = nn.Linear(4, 1)
x, t = torch.randn(8, 4), torch.randn(8, 1)
out = m(x).detach()  # <- cause
loss = F.mse_loss(out, t)
loss.backward()
"""),
    _p("grad-none-zero", r"'NoneType' object has no attribute 'zero_'", "GT801",
       "<tensor>.grad is None",
       """.grad is None for a non-leaf tensor (for example w = w - lr * w.grad or .to()/.double()
       after requires_grad=True made a new tensor), before the first backward(), for a parameter
       not used in the forward pass or frozen, and right after optimizer.zero_grad(), whose default
       set_to_none=True sets every .grad to None. optimizer.zero_grad() itself never raises
       this.""",
       """Use optimizer.zero_grad() (or `if p.grad is not None`), update leaves in place under
       torch.no_grad(), and create tensors on the target dtype/device with requires_grad=True.""",
       _HEAD + """w = torch.randn(3, requires_grad=True)
for step in range(2):
    loss = (w ** 2).sum()
    loss.backward()
    w = w - 0.1 * w.grad  # <- cause
    w.grad.zero_()
"""),
    _p("grad-none-attr", r"'NoneType' object has no attribute '(data|mul_|div_|add_|sub_|copy_|"
       r"clamp_|norm|abs|pow|clone|sum|mean|sign|view|reshape|shape|size)'", "GT801",
       "<tensor>.grad is None",
       """.grad is None for a parameter frozen with requires_grad=False, one not used in the
       forward pass, a non-leaf tensor, before the first backward(), and right after
       optimizer.zero_grad() (set_to_none=True).""",
       """Skip parameters whose .grad is None (or that do not require grad) when you scale,
       clip or read gradients.""", ""),
    _p("non-scalar", r"grad can be implicitly created only for (real )?scalar outputs", "GT802",
       "backward() without a gradient on a tensor that is not a scalar",
       """backward() with no argument needs a tensor with exactly one element. The tensor here has
       more: a loss with reduction='none', backward() on the model output, or stacked losses.
       retain_graph has nothing to do with it.""",
       """Reduce it first (loss.mean() or loss.sum()), or pass gradient=torch.ones_like(t).""",
       _HEAD + """m = nn.Linear(4, 1)
x, t = torch.randn(8, 4), torch.randn(8, 1)
loss = F.mse_loss(m(x), t, reduction="none")  # <- cause
loss.backward()
"""),
    _p("grad-shape", r"Mismatch in shape: grad_output\[\d+\] has a shape of", "GT830",
       "the gradient passed to backward() does not have its output's shape",
       """backward(gradient) / torch.autograd.backward(tensors, grad_tensors) /
       autograd.grad(..., grad_outputs) take one gradient per output, each in that output's
       shape: a gradient of shape [N, 1] for an output of shape [N] (after a squeeze), or
       torch.ones(1) for a 0-dim loss, is refused before anything runs.""",
       """Build each gradient in its output's shape (torch.ones_like(output)), or reduce the
       outputs to scalars and call backward() without gradients.""",
       _HEAD + """m = nn.Linear(4, 1)
out = m(torch.randn(8, 4)).squeeze(1)
grad = torch.ones(8, 1)  # <- cause
out.backward(grad)
"""),
    _p("optimizer-state-groups", r"loaded state dict (has a different number of parameter "
       r"groups|contains a parameter group that doesn't match the size of optimizer's group)",
       "GT831", "the optimizer's parameter groups do not match the checkpoint's",
       """optimizer.load_state_dict() needs the same parameter groups, of the same sizes, as the
       optimizer that saved the state: a group added later with add_param_group (a loss with
       learnable weights, a new head), or parameters added or removed since the save, make it
       refuse the checkpoint.""",
       """Load the optimizer's state after every parameter group is in place, with the model the
       checkpoint was saved from.""",
       _HEAD + """m, extra = nn.Linear(2, 1), nn.Parameter(torch.zeros(1))
saver = torch.optim.SGD(m.parameters(), lr=0.1)
saver.add_param_group({"params": [extra]})
ckpt = saver.state_dict()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
opt.load_state_dict(ckpt)  # <- cause
opt.add_param_group({"params": [extra]})
"""),
    _p("backward-twice", r"Trying to backward through the graph a second time", "GT803",
       "backward through a part of the graph that an earlier backward already freed",
       """backward() frees the saved tensors of the graph it ran through. A later backward that
       reaches the same nodes fails: an RNN hidden state or a feature carried from the previous
       step without .detach(), a GAN generator output used in the discriminator step without
       .detach(), a tensor computed once outside the loop, or two losses sharing a sub-graph.""",
       """Detach what is carried across steps (h = h.detach()), use D(fake.detach()) for the
       discriminator, recompute the shared part inside the loop, sum the losses and call backward
       once, or pass retain_graph=True to the first backward when that is really intended.""",
       _HEAD + """rnn = nn.RNN(4, 8, batch_first=True)
h = torch.zeros(1, 2, 8)
for step in range(2):
    out, h = rnn(torch.randn(2, 5, 4), h)  # <- cause
    out.sum().backward()
"""),
    _p("inplace-saved", r"one of the variables needed for gradient computation has been modified "
       r"by an inplace operation", "GT804",
       "a tensor saved for backward was modified in place",
       """An op saved a tensor during the forward pass to compute its gradient, and an in-place op
       (x += ..., x.mul_(), x[i] = ..., ReLU(inplace=True), or optimizer.step() on a parameter)
       changed it before backward ran. The version counter in the message shows the change.""",
       """Use the out-of-place form (x = x + ..., torch.relu(x)), .clone() before modifying, or
       call optimizer.step() only after every backward that needs the current graph.""",
       _HEAD + """x = torch.randn(3, requires_grad=True)
y = torch.sigmoid(x)
y.mul_(2)  # <- cause
y.sum().backward()
"""),
    _p("detached-saved", r"Trying to use a saved tensor that has been detached in-place",
       "GT804", "a tensor saved for backward was detached in place with .detach_()",
       """An op saved a tensor for its gradient and `.detach_()` then detached that tensor in
       place; backward() raises without naming a line (gradtrace run names the detach_()).""",
       """Use the out-of-place `x = x.detach()` (a new tensor), or detach after backward().""",
       _HEAD + """y = torch.randn(3, requires_grad=True) * 2
z = (y * y).sum()
y.detach_()  # <- cause
z.backward()
"""),
    _p("inplace-leaf", r"a (view of a )?leaf Variable that requires grad is being used in an "
       r"in-place operation", "GT805",
       "in-place operation on a leaf tensor that requires grad",
       """Autograd forbids in-place changes to a leaf that requires grad (a parameter or a tensor
       created with requires_grad=True), or to a view of one, while grad mode is on, because the
       change itself would have to be differentiated.""",
       """Do manual updates and initialisation under `with torch.no_grad():` (w -= lr * w.grad),
       or use nn.init functions.""",
       _HEAD + """w = torch.randn(3, requires_grad=True)
(w ** 2).sum().backward()
w -= 0.1 * w.grad  # <- cause
"""),
    _p("number-backward", r"'(float|int|bool|numpy\.\w+)' object has no attribute 'backward'",
       "GT806", "backward() called on a Python or numpy number",
       """The loss became a plain number: .item(), float(), math.*, numpy, or sum() of .item()
       values return a Python/numpy scalar that is not connected to autograd (an accumulator
       initialised to 0 and never added to stays an int).""",
       """Keep the loss a tensor: combine terms with tensor ops (loss = l1 + l2) and use .item()
       only for logging.""",
       _HEAD + """m = nn.Linear(4, 1)
x, t = torch.randn(8, 4), torch.randn(8, 1)
loss = F.mse_loss(m(x), t).item()  # <- cause
loss.backward()
"""),
    _p("numpy-grad", r"Can't call numpy\(\) on Tensor that requires grad", "GT807",
       ".numpy() (or np.asarray) on a tensor that requires grad",
       """numpy cannot share memory with a tensor that autograd tracks. np.asarray(t)/np.array(t)
       call .numpy() too. .tolist() and tensors made under no_grad work.""",
       """Use t.detach().cpu().numpy() for plots and metrics.""",
       _HEAD + """m = nn.Linear(3, 1)
out = m(torch.randn(2, 3))
arr = out.numpy()  # <- cause
"""),
    _p("inference-saved", r"Inference tensors cannot be saved for backward|Inplace update to "
       r"inference tensor outside InferenceMode|Setting requires_grad=True on inference tensor "
       r"outside InferenceMode", "GT808",
       "a tensor created under torch.inference_mode() is used in autograd",
       """Tensors created inside torch.inference_mode() are inference tensors forever: they cannot
       be saved for backward, updated in place or given requires_grad outside inference mode.
       Typical causes: features precomputed under inference_mode, a cache or model built during
       an inference_mode evaluation and reused for training.""",
       """Use torch.no_grad() instead of inference_mode where the result is reused for training,
       or make a normal tensor with .clone() outside inference mode.""",
       _HEAD + """with torch.inference_mode():  # <- cause
    feats = torch.randn(8, 4) * 2
head = nn.Linear(4, 1)
head(feats).sum().backward()
"""),
    _p("optimizer-empty", r"optimizer got an empty parameter list", "GT809",
       "the optimizer was given no parameters",
       """The iterable passed to the optimizer was empty: an already consumed model.parameters()
       generator (it can be iterated only once), a model whose layers sit in a plain list, or a
       filter that kept nothing.""",
       """Pass model.parameters() directly (or list(...) once), and register layers with
       nn.ModuleList / nn.ParameterList.""",
       _HEAD + """model = nn.Linear(4, 1)
params = model.parameters()
n = len(list(params))  # <- cause
opt = torch.optim.SGD(params, lr=0.1)
"""),
    _p("optimizer-non-leaf", r"can't optimize a non-leaf Tensor", "GT810",
       "the optimizer was given a non-leaf tensor",
       """Optimizers update leaves in place. A tensor produced by an op (for example
       torch.randn(3, requires_grad=True).double() or .to(device)) is a non-leaf result, not the
       tensor you created.""",
       """Create it with the final dtype/device: torch.randn(3, dtype=..., device=...,
       requires_grad=True), or call .requires_grad_() after the conversion.""",
       _HEAD + """w = torch.randn(3, requires_grad=True).double()  # <- cause
opt = torch.optim.SGD([w], lr=0.1)
"""),
    _p("function-grad-count", r"function \w+ returned an incorrect number of gradients", "GT811",
       "a custom autograd.Function.backward returns the wrong number of gradients",
       """backward() must return one value per input of forward() (None for inputs that need no
       gradient), in the same order.""",
       """Return a tuple with exactly one entry per forward input, using None where needed.""",
       _HEAD + """class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b  # <- cause
a = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
Mul.apply(a, b).sum().backward()
"""),
    _p("function-grad-arguments", r"[\w.<>]+\.backward\(\) (takes \d+ positional arguments? but "
       r"\d+ were given|missing \d+ required positional argument)", "GT811",
       "a custom autograd.Function.backward takes the wrong number of gradients",
       """Autograd calls backward(ctx, *grads) with one gradient per output of forward (zeros
       for outputs marked non-differentiable, None for outputs that are not tensors).""",
       """Take one argument per forward output (or *grads).""",
       _HEAD + """class Stats(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x.mean()

    @staticmethod
    def backward(ctx, g):  # <- cause
        return g * 2
x = torch.randn(3, requires_grad=True)
Stats.apply(x)[0].sum().backward()
""", twin="function-grad-arguments"),
    _p("grad-unused-input", r"(One of the differentiated Tensors|The differentiated Tensor at "
       r"index \d+) appears to not have been used in the graph", "GT812",
       "torch.autograd.grad over an input that the output does not depend on",
       """One of the `inputs` is not reachable from the outputs: it was not used, was used only
       after a detach/no_grad cut, or is a different tensor object (for example a re-created
       parameter) than the one used in the forward pass.""",
       """Pass the tensor that was actually used, or allow_unused=True (its gradient is None).""",
       _HEAD + """a = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
out = (a * 2).sum()
torch.autograd.grad(out, [a, b])  # <- cause
"""),
    _p("none-assigned", r"'NoneType' object has no attribute '(step|zero_grad|item|backward|"
       r"parameters|state_dict|train|eval|param_groups|detach|cpu|numpy|to)'|'_IncompatibleKeys' "
       r"object is not callable", "GT813",
       "the None result of a method was assigned back to the variable",
       """optimizer.step(), optimizer.zero_grad(), loss.backward() and scheduler.step() return
       None, and model.load_state_dict() returns _IncompatibleKeys, so `x = x.step()` replaces the
       object. (model.train()/.eval()/.to() return the module, so reassigning them is fine.)""",
       """Call the method without assigning: optimizer.step(), not optimizer = optimizer.step().""",
       _HEAD + """model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    optimizer.zero_grad()
    F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    optimizer = optimizer.step()  # <- cause
"""),
    _p("out-requires-grad", r"functions with out=\.\.\. arguments don't support automatic "
       r"differentiation", "GT818", "an out= argument that requires grad",
       """A function called with out=... writes its result into an existing tensor and records
       nothing for autograd, so it refuses to run when an argument (often the out tensor itself,
       a Parameter being initialised) requires grad.""",
       """Initialise the parameter under torch.no_grad() (self.freq.copy_(torch.arange(...))), or
       drop out= and use the returned tensor.""",
       _HEAD + """freq = nn.Parameter(torch.empty(4))
torch.arange(1, 5, out=freq)  # <- cause
"""),
    _p("legacy-function", r"Legacy autograd function with non-static forward method is "
       r"deprecated", "GT819", "an autograd.Function with a non-static forward",
       """Custom autograd Functions must define forward/backward as static methods taking ctx
       and be applied with Fn.apply(x); an instance called like a module (Fn()(x)) whose
       forward is a plain method is the removed legacy style.""",
       """Decorate forward and backward with @staticmethod, take ctx as first argument (store
       per-call values on ctx) and call Fn.apply(x) instead of Fn()(x).""",
       _HEAD + """class Reverse(torch.autograd.Function):
    def forward(self, x):  # <- cause
        return x * 1.0

    def backward(self, g):
        return -g

y = Reverse()(torch.randn(3, requires_grad=True))
"""),
    _p("requires-grad-dtype", r"(?i)only Tensors of floating point (and complex )?dtype can "
       r"require gradients", "GT814", "requires_grad on an integer or bool tensor",
       """Only floating point and complex tensors can require gradients. Integer tensors (class
       indices from argmax/max, masks, token ids) are not differentiable: setting requires_grad
       on them, or wrapping them in nn.Parameter, fails.""",
       """Keep integer tensors as plain tensors or buffers (register_buffer); to learn a mask,
       make it a float Parameter. For a loss, use the float scores, not the indices.""",
       _HEAD + """mask = torch.tensor([1, 0, 1])
mask.requires_grad = True  # <- cause
"""),
    _p("requires-grad-non-leaf", r"you can only change requires_grad flags of leaf variables",
       "GT815", "requires_grad changed on a computed (non-leaf) tensor",
       """A tensor produced by an op on tensors that require grad is already part of the graph;
       its requires_grad flag cannot be changed. Often the name was meant to hold a fresh leaf
       but was rebound to a computed value (x = x + step in a loop).""",
       """Use x = x.detach().requires_grad_() to start a new leaf, .retain_grad() to read the
       gradient of an intermediate, or .detach() to stop gradients.""",
       _HEAD + """x = torch.zeros(3, requires_grad=True)
s = torch.sigmoid(x)
s.requires_grad = True  # <- cause
"""),
    _p("module-attribute", r"cannot assign '[^']*' (as parameter|object to parameter|as child "
       r"module) |cannot assign (module|parameters?) before Module\.__init__\(\) call", "GT816",
       "a plain tensor or object assigned where the module registers a Parameter or submodule",
       """nn.Module keeps Parameters and submodules in registries: under a Parameter's name it
       accepts only an nn.Parameter (or None), under a submodule's name only a module, and
       nothing before super().__init__() ran. Assigning a computed tensor over a Parameter
       (self.w = F.softmax(self.w, 0) in forward) or registering a plain tensor fails.""",
       """Compute into a local name and keep the Parameter (w = F.softmax(self.w, 0)); wrap a
       new tensor in nn.Parameter in __init__; call super().__init__() before any assignment.""",
       _HEAD + """class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, xs):
        self.w = F.softmax(self.w, dim=0)  # <- cause
        return (self.w * xs).sum()

Mix()(torch.randn(3))
"""),
    _p("param-two-groups", r"some parameters appear in more than one parameter group", "GT817",
       "a parameter given to two parameter groups of one optimizer",
       """An optimizer's parameter groups must be disjoint. A group built from model.parameters()
       next to a group of some of the same parameters (a head with its own learning rate, batch
       norm without weight decay) repeats them.""",
       """Split the parameters into disjoint sets: the special ones, then every other parameter
       (compare by identity: p not in set(special)).""",
       _HEAD + """model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 1))
opt = torch.optim.SGD([{"params": model.parameters()},  # <- cause
                       {"params": model[1].parameters(), "lr": 0.1}], lr=0.01)
"""),
    _p("non-leaf-grad-warning", r"The \.grad attribute of a Tensor that is not a leaf Tensor is "
       r"being accessed", "GT822", ".grad read on a non-leaf tensor",
       """Only leaf tensors (created by you, e.g. parameters) get .grad filled by backward. This
       tensor was produced by an op, so its .grad stays None.""",
       """Read .grad of the leaf you created, call .retain_grad() on the intermediate before
       backward, or create the tensor directly with the right dtype/device.""",
       """import warnings
import torch
warnings.simplefilter("error")  # the warning becomes an exception for this repro
x = torch.randn(3, requires_grad=True)
y = x * 2
y.sum().backward()
print(y.grad)  # <- cause
"""),
    *CRASH_PATTERNS,
)


def match_message(text: str) -> list[ErrorPattern]:
    """Every catalogue entry whose regex matches ``text`` (most specific first)."""
    return [p for p in PATTERNS if p.search(text)]


def pattern(key: str) -> ErrorPattern:
    """The catalogue entry with this key."""
    for p in PATTERNS:
        if p.key == key:
            return p
    raise KeyError(key)


def explain_message(text: str, *, partial: bool = True) -> list[Finding]:
    """Findings for an error message alone (no program to look at): mechanism and fixes.

    Used by ``gradtrace explain "<error text>"``. Findings have ``path="<message>"`` and
    ``line=1`` since no source location is known; an unknown message gives ``[]``. With
    ``partial`` a message matching no entry exactly is matched by its words
    (:func:`match_partial`).
    """
    from gradtrace.findings import Fix

    pats = match_message(text) or (match_partial(text) if partial else [])
    out: list[Finding] = []
    for p in pats:
        code = p.finding_code
        name = TABLE[code].name if code in TABLE else next(
            (n for c, n in STATIC_TWINS.values() if c == code), p.key)
        out.append(Finding(code=code, name=name,
                           message=f"{p.title}: {p.explanation}", path="<message>", line=1,
                           severity="error", fix=Fix(p.fix, "unsafe"), source="runtime"))
    return out


_WORD = re.compile(r"[a-z][a-z0-9_]*|[0-9]+")
_ERROR_TYPE = re.compile(r"^\s*[\w.]*(?:Error|Exception|Warning):\s*")


def match_partial(text: str) -> list[ErrorPattern]:
    """Entries whose message has every word of ``text``: a prefix ending in ``...``, or the
    distinctive words of a message (at least three; the exception type before ``:`` is
    ignored). For ``gradtrace explain`` only: a real exception is matched by :func:`match_message`.
    """
    body = _ERROR_TYPE.sub("", text.strip())
    cut = body.endswith(("...", "\u2026"))
    words = _WORD.findall(body.rstrip(".\u2026 ").lower())
    if len(words) < 3:
        return []
    out = []
    for p in PATTERNS:
        vocab = _WORD.findall(p.regex.replace("\\", " ").lower())
        *whole, last = words
        if set(whole) <= set(vocab) and (last in vocab or cut and any(
                v.startswith(last) for v in vocab)):
            out.append(p)
    return out
