"""Session 35, runtime (docs/triage/runtime35.md): the run names the root line first.
Real torch; each bug has its look-alike."""
from __future__ import annotations

import inspect

import torch
import torch.nn as nn
import torch.nn.functional as F

import gradtrace
from rt_helpers import marked_line


# -- NOTE [cut that reaches the loss] ----------------------------------------------------------
def _first(tr, code: str):
    return next((f for f in tr.findings if f.code == code), None)


def _pad_to(t: torch.Tensor, n: int, data: bool) -> torch.Tensor:
    width = [0] * (len(t.data.shape) * 2)  # a size read from `.data`: cuts nothing
    width[1] = n - t.shape[-1]
    return F.pad(t.data if data else t, width)


def _padded_model(data: bool):
    class Padded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.last = nn.Linear(5, 6), nn.Linear(8, 2)

        def forward(self, x):
            return self.last(_pad_to(torch.relu(self.first(x)), 8, data))

    torch.manual_seed(0)
    model = Padded()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradtrace.trace(static=False) as tr:
        for _ in range(3):
            loss = F.mse_loss(model(torch.randn(4, 5)), torch.randn(4, 2))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr


def test_the_cut_whose_value_goes_on_to_the_loss_is_named_not_a_size_read_before_it():
    """brevitas' pad_to_dim: `len(t.data.shape)` (a size) is cut first, `F.pad(t.data, ...)`
    is the cut whose value the next layer and the loss use."""
    tr = _padded_model(data=True)
    f = _first(tr, "GT105")
    assert f is not None and "first.weight" in f.message
    pad_line = _pad_to.__code__.co_firstlineno + 3
    assert f.line == pad_line, (f.line, pad_line)


def test_the_size_read_alone_is_silent():
    tr = _padded_model(data=False)
    assert [f.code for f in tr.findings] == []


def _logged_then_cut(log_first: bool):
    torch.manual_seed(0)
    first, second = nn.Linear(4, 6), nn.Linear(6, 1)
    opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
    norms = []
    with gradtrace.trace(static=False) as tr:
        for _ in range(3):
            h = first(torch.randn(8, 4))
            if log_first:
                norms.append(h.detach().norm())  # <- log
            out = second(h.detach())  # <- cut
            if not log_first:
                norms.append(h.detach().norm())  # <- log after
            loss = out.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr


def test_a_logging_detach_made_first_does_not_outrank_the_cut_handed_to_the_next_layer():
    lines, start = inspect.getsourcelines(_logged_then_cut)
    cut = start + next(i for i, l in enumerate(lines) if "# <- cut" in l)
    for log_first in (True, False):
        f = _first(_logged_then_cut(log_first), "GT107")
        assert f is not None and "weight" in f.message
        assert f.line == cut, (log_first, f.line, cut)


# -- NOTE [input the Function treats as a constant] --------------------------------------------
STE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bits, scale):
        q = torch.round(x / scale).clamp(-2 ** (bits - 1), 2 ** (bits - 1) - 1)
        ctx.save_for_backward((q.abs() < 2 ** (bits - 1) - 1).float())
        return q * scale

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None, None


def quantize(w, scale):
    return FakeQuant.apply(w, 4, scale)  # <- call


class QLinear(nn.Linear):
    def __init__(self, n, m):
        super().__init__(n, m)
        self.scale = SCALE

    def forward(self, x):
        return F.linear(x, quantize(self.weight, self.scale), self.bias)


torch.manual_seed(0)
model = nn.Sequential(QLinear(6, 8), nn.ReLU(), QLinear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    loss = F.mse_loss(model(torch.randn(5, 6)), torch.randn(5, 2))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_trainable_scale_handed_to_a_straight_through_function_names_the_call(run_script):
    """torchao PR 2280: the scales became Parameters, the STE Function keeps nothing of them."""
    src = STE.replace("SCALE", "nn.Parameter(torch.full((), 0.1))")
    res = run_script(src)
    f = next(f for f in res.findings if f["code"] == "GT845")
    assert f["line"] == marked_line(src, "# <- call"), res.err
    assert res.findings[0]["code"] == "GT845", res.err


def test_a_constant_scale_handed_to_the_same_function_is_silent(run_script):
    src = STE.replace("SCALE", "0.1")
    assert run_script(src).findings == []


def test_a_scale_the_backward_reads_keeps_the_return_line(run_script):
    """The backward knows the scale (saved), so the None written for it is the forgotten
    gradient: the return line, as before."""
    src = STE.replace("SCALE", "nn.Parameter(torch.full((), 0.1))").replace(
        "ctx.save_for_backward((q.abs() < 2 ** (bits - 1) - 1).float())",
        "ctx.save_for_backward((q.abs() < 2 ** (bits - 1) - 1).float(), scale)").replace(
        "(mask,) = ctx.saved_tensors", "mask, scale = ctx.saved_tensors").replace(
        "return g * mask, None, None", "return g * mask * scale / scale, None, None  # <- ret")
    res = run_script(src)
    f = next(f for f in res.findings if f["code"] == "GT845")
    assert f["line"] == marked_line(src, "# <- ret"), res.err


# -- NOTE [warnings our own code raised] -------------------------------------------------------
META = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
outer = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(2):
    kept = {n: p for n, p in net.named_parameters()}
    for _ in range(2):  # a functional inner loop: the module's parameters become non-leaves
        names, params = zip(*net.named_parameters())
        grads = torch.autograd.grad(F.mse_loss(net(torch.randn(6, 4)), torch.randn(6, 1)),
                                    params, create_graph=True)
        for name, p, g in zip(names, params, grads):
            owner, _, attr = name.rpartition(".")
            net.get_submodule(owner)._parameters[attr] = p - 0.1 * g
    loss = F.mse_loss(net(torch.randn(6, 4)), torch.randn(6, 1))
    outer.zero_grad()
    loss.backward()
    READ
    outer.step()
    for name, p in kept.items():
        owner, _, attr = name.rpartition(".")
        net.get_submodule(owner)._parameters[attr] = p
"""


def test_the_step_hook_reading_adapted_non_leaf_parameters_is_no_finding_and_no_warning(
        run_script):
    """torchopt's MetaAdam look-alike: the outer step runs while the module holds the adapted
    (non-leaf) tensors; only our step hook read their .grad."""
    res = run_script(META.replace("READ", "pass"))
    assert res.findings == [], res.err
    assert "not a leaf" not in res.err


def test_the_program_reading_a_non_leaf_grad_is_still_reported(run_script):
    src = META.replace("READ", "print(net[0].weight.grad)  # <- read")
    res = run_script(src)
    f = next(f for f in res.findings if f["code"] == "GT307")
    assert f["line"] == marked_line(src, "# <- read"), res.err


# -- NOTE [partial window carried into the next], NOTE [discarded gradients] --------------------
EPOCHS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def train_one_epoch(model, opt, data, accum):
    for sub_idx, (x, y) in enumerate(data):
        batch_idx = sub_idx // accum
        (F.mse_loss(model(x), y) / accum).backward()
        if sub_idx % accum == accum - 1:
            opt.step()
            opt.zero_grad()
    if FLUSH % accum != accum - 1:  # <- flush
        opt.zero_grad()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(4, 5), torch.randn(4, 1)) for _ in range(7)]
for epoch in range(2):
    train_one_epoch(model, opt, data, 2)
"""


def test_a_flush_testing_the_step_count_carries_the_partial_window_into_the_next_epoch(
        run_script):
    """icefall PR 1693: the end-of-epoch clear tests batch_idx, so it never runs."""
    src = EPOCHS.replace("FLUSH", "batch_idx")
    res = run_script(src)
    assert res.findings and res.findings[0]["code"] == "GT892", res.err
    assert res.findings[0]["line"] == marked_line(src, "# <- flush"), res.err


def test_a_flush_testing_the_micro_batch_index_is_silent(run_script):
    """The fix: the partial window is cleared, the next epoch's window restarts full (no
    GT827 for the cleared partial window either)."""
    assert run_script(EPOCHS.replace("FLUSH", "sub_idx")).findings == []


# -- NOTE [call in a branch that never ran] ----------------------------------------------------
COND = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, cond_layer):
        super().__init__()
        self.cond_layer = cond_layer
        self.layers = nn.ModuleList(nn.Linear(6, 6) for _ in range(3))
        self.cond = nn.Linear(4, 6)

    def forward(self, x, g=None):
        for i, layer in enumerate(self.layers):
            if i == self.cond_layer - 1 and g is not None:  # <- branch
                x = x + self.cond(g)
            x = torch.relu(layer(x))
        return x


torch.manual_seed(0)
speaker = nn.Linear(5, 4)
encoder = Encoder(cond_layer=LAYER)
opt = torch.optim.Adam([*speaker.parameters(), *encoder.parameters()], lr=1e-3)
before = [p.detach().clone() for p in [*speaker.parameters(), *encoder.parameters()]]
for _ in range(3):
    g = speaker(torch.randn(2, 5))
    loss = F.mse_loss(encoder(torch.randn(2, 6), g=g), torch.randn(2, 6))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(sum((p - b).abs().sum().item() for p, b in zip([*speaker.parameters()], before)))
"""


def test_a_layer_called_only_in_a_branch_that_never_ran_names_the_branch(run_script):
    """fish-speech 9b916b1: `i == speaker_cond_layer - 1` is -1 for layer 0; the snapshot of
    the weights (`before`) is not named for the speaker encoder either."""
    src = COND.replace("LAYER", "0")
    res = run_script(src)
    assert res.findings and res.findings[0]["code"] == "GT820", res.err
    assert res.findings[0]["line"] == marked_line(src, "# <- branch"), res.err
    assert not any(f["code"] == "GT107" for f in res.findings), res.err


def test_the_branch_taken_is_silent(run_script):
    assert run_script(COND.replace("LAYER", "1")).findings == []


def test_windows_that_vary_with_the_data_are_no_carried_leftover():
    """Accumulation by tokens: windows of 3 and 4 alike (and a wide first window) are silent;
    one leftover per pass is GT892."""
    from types import SimpleNamespace

    from gradtrace.runtime.frames import Site
    from gradtrace.runtime.trace.windows import _carried_finding

    site = Site(__file__, 1, "f")
    carried = _carried_finding(SimpleNamespace(windows=[2, 2, 2, 3, 2, 2], site=site))
    assert [f.code for f in carried] == ["GT892"]
    for windows in ([3, 4, 3, 4, 3, 4, 3], [3, 3, 4, 3, 4, 4, 3], [3, 2, 2, 2, 2]):
        assert _carried_finding(SimpleNamespace(windows=windows, site=site)) == []
