"""Every section of docs/pytorch-facts.md, checked on the installed torch (one test each)."""
from __future__ import annotations

import copy
import re
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "pytorch-facts.md"
NO_GRAPH = "element 0 of tensors does not require grad and does not have a grad_fn"


def _sections() -> list[str]:
    return re.findall(r"^## ([a-z0-9-]+)$", DOC.read_text(encoding="utf-8"), re.M)


def test_every_section_has_its_test_and_every_citation_a_section():
    tests = {n[len("test_"):].replace("_", "-") for n in globals() if n.startswith("test_")}
    assert set(_sections()) <= tests
    cited = set()
    for path in [*(ROOT / "src").rglob("*.py"), ROOT / "docs" / "rules.md", ROOT / "README.md"]:
        text = path.read_text(encoding="utf-8")
        assert "PYTORCH_FACTS" not in text, path
        cited |= set(re.findall(r"pytorch-facts\.md#([a-z0-9-]+)", text))
    assert cited and cited <= set(_sections()), cited - set(_sections())


def test_grad_accumulation():
    w = torch.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    first = w.grad.clone()
    (w * 3).sum().backward()
    assert torch.equal(first, torch.full((3,), 2.0))
    assert torch.equal(w.grad, torch.full((3,), 5.0))  # 2 + 3: added, not replaced
    w.grad = None
    (w * 3).sum().backward()
    assert torch.equal(w.grad, torch.full((3,), 3.0))


def test_grad_mode_nesting():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        with torch.enable_grad():
            assert (x * 2).grad_fn is not None
    with torch.inference_mode():
        with torch.enable_grad():
            assert torch.is_grad_enabled() and (x * 2).grad_fn is None
        with torch.inference_mode(False):
            assert (x * 2).grad_fn is not None


def test_grad_mode_left_off():
    x = torch.ones(2, requires_grad=True)
    try:
        torch.set_grad_enabled(False)
        assert (x * 2).grad_fn is None and (x + 1).grad_fn is None
    finally:
        torch.set_grad_enabled(True)

    @torch.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert f(x).grad_fn is None and (x * 2).grad_fn is not None


def _no_graph(loss: torch.Tensor) -> None:
    with pytest.raises(RuntimeError, match=NO_GRAPH):
        loss.backward()


def test_no_graph_loss():
    m, x, y = nn.Linear(3, 1), torch.randn(4, 3), torch.randn(4, 1)
    with torch.no_grad():
        _no_graph(F.mse_loss(m(x), y))
    _no_graph(F.mse_loss(m(x).detach(), y))
    _no_graph(torch.tensor(F.mse_loss(m(x), y).item()))
    _no_graph(m(x).argmax().float())
    with torch.inference_mode():
        out = m(x)
    _no_graph(F.mse_loss(out, y))


def test_partly_cut_graph():
    enc, head = nn.Linear(3, 3), nn.Linear(3, 1)
    with torch.no_grad():
        feats = enc(torch.randn(4, 3))
    head(feats).sum().backward()
    assert head.weight.grad is not None and enc.weight.grad is None


def test_python_number_loss():
    m = nn.Linear(3, 1)
    loss = F.mse_loss(m(torch.randn(4, 3)), torch.randn(4, 1))
    number = loss.item()
    assert type(number) is float and type(float(loss.detach())) is float
    with pytest.raises(AttributeError, match="'float' object has no attribute 'backward'"):
        number.backward()  # type: ignore[attr-defined]
    assert loss.grad_fn is not None  # .item() left the graph alone
    _no_graph(torch.tensor([loss.item(), loss.item()]).sum())
    loss.backward()


def test_non_scalar_backward():
    m = nn.Linear(3, 1)
    per_example = F.mse_loss(m(torch.randn(4, 3)), torch.randn(4, 1), reduction="none")
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for"):
        per_example.backward(retain_graph=True)
    per_example.mean().backward()
    m(torch.randn(1, 3)).backward()  # one element is enough


def test_backward_twice():
    x = torch.randn(3, requires_grad=True)
    shared = torch.sigmoid(x)
    shared.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        (shared * 2).sum().backward()


def test_saved_tensor_inplace():
    x = torch.randn(3, requires_grad=True)
    y = torch.sigmoid(x)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    m = nn.Linear(3, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    out = (m.weight ** 2).sum()  # pow saves the weight itself
    out.backward(retain_graph=True)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_leaf_inplace():
    w = torch.randn(3, requires_grad=True)
    (w ** 2).sum().backward()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        w -= 0.1 * w.grad
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[0] = 1.0
    with torch.no_grad():
        w -= 0.1 * w.grad
    assert w.is_leaf


def test_rebound_leaf():
    w = torch.randn(3, requires_grad=True)
    (w ** 2).sum().backward()
    w = w - 0.1 * w.grad
    assert not w.is_leaf and w.grad_fn is not None
    (w ** 2).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert w.grad is None


def test_non_leaf_grad():
    x = torch.randn(3, requires_grad=True)
    y = x * 2
    z = x * 3
    z.retain_grad()
    (y + z).sum().backward()
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert y.grad is None
    assert z.grad is not None and x.grad is not None
    assert not torch.randn(3, requires_grad=True).double().is_leaf


def test_inference_tensors():
    with torch.inference_mode():
        feats = torch.randn(4, 3) * 2
    head = nn.Linear(3, 1)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        head(feats).sum().backward()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside"):
        feats.add_(1)
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor"):
        feats.requires_grad_()
    head(feats.clone()).sum().backward()
    with torch.no_grad():
        assert not torch.randn(2).is_inference()


def test_registration():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))
            self.plain = torch.ones(2, requires_grad=True)
            self.listed = [nn.Linear(2, 2)]
            self.kept = nn.ModuleList([nn.Linear(2, 2)])

    net = Net()
    names = {n for n, _ in net.named_parameters()}
    assert names == {"w", "kept.0.weight", "kept.0.bias"}
    assert "plain" not in net.state_dict()
    (net.plain * net.listed[0](net.w)).sum().backward()
    assert net.plain.grad is not None and net.listed[0].weight.grad is not None


def test_optimizer_identity():
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model = nn.Linear(3, 1)
    before = model.weight.detach().clone()
    F.mse_loss(model(torch.randn(4, 3)), torch.randn(4, 1)).backward()
    opt.step()
    assert torch.equal(model.weight, before)
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    assert not held & {id(p) for p in copy.deepcopy(model).parameters()}
    kept = nn.Linear(3, 1)
    ids = [id(p) for p in kept.parameters()]
    kept.load_state_dict(nn.Linear(3, 1).state_dict())
    assert [id(p) for p in kept.to(torch.float32).parameters()] == ids
    kept.load_state_dict(nn.Linear(3, 1).state_dict(), assign=True)
    assert [id(p) for p in kept.parameters()] != ids
    params = kept.parameters()
    list(params)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        torch.optim.SGD(params, lr=0.1)


def test_all_frozen():
    m = nn.Linear(3, 1)
    m.bias.requires_grad_(False)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    bias = m.bias.detach().clone()
    m(torch.randn(4, 3)).sum().backward()
    opt.step()
    assert torch.equal(m.bias, bias) and m.weight.grad is not None
    m.weight.requires_grad_(False)
    _no_graph(m(torch.randn(4, 3)).sum())


def _change(order: str) -> float:
    torch.manual_seed(0)
    m = nn.Linear(3, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    before = m.weight.detach().clone()
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    for step in order.split(","):
        if step == "zero":
            opt.zero_grad()
        elif step == "backward":
            F.mse_loss(m(x), y).backward()
        else:
            opt.step()
    return float((m.weight - before).abs().sum())


def test_zero_grad_order():
    usual = _change("zero,backward,step")
    assert usual > 0 and _change("backward,step,zero") == usual
    assert _change("backward,zero,step") == 0.0


def test_loss_accumulation():
    m = nn.Linear(3, 1)
    total = 0
    for _ in range(3):
        total += m(torch.randn(2, 3)).sum()
    assert isinstance(total, torch.Tensor) and total.grad_fn is not None
    number = 0.0
    for _ in range(3):
        number += m(torch.randn(2, 3)).sum().item()
    assert type(number) is float


def test_none_returning_methods():
    m = nn.Linear(3, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    loss = m(torch.randn(2, 3)).sum()
    assert loss.backward() is None and opt.step() is None and opt.zero_grad() is None
    assert sched.step() is None
    assert m.load_state_dict(m.state_dict()) is not m
    assert m.train() is m and m.eval() is m and m.to(torch.float32) is m
    assert m.requires_grad_() is m


def test_inputs_need_no_grad():
    m = nn.Linear(3, 1)
    x = torch.randn(4, 3)
    m(x).sum().backward()
    assert not x.requires_grad and m.weight.grad is not None and x.grad is None


def test_gradcheck_float64():
    from torch.autograd.gradcheck import GradcheckError

    lin = nn.Linear(3, 2)
    x32 = torch.randn(2, 3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(GradcheckError):
            torch.autograd.gradcheck(lambda t: lin(t).exp(), (x32,), eps=1e-6, atol=1e-5)
    lin64 = lin.double()
    assert torch.autograd.gradcheck(lambda t: lin64(t), (x32.detach().double().requires_grad_(),))


def _saved_bytes(grad: bool) -> int:
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.set_grad_enabled(grad):
            m(torch.randn(32, 8))
    return total[0]


def test_no_grad_saves_activations():
    assert _saved_bytes(True) > 0 and _saved_bytes(False) == 0


def test_duplicate_parameters_step_twice():
    for foreach in (False, True):
        w = nn.Parameter(torch.zeros(1))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            opt = torch.optim.SGD([w, w], lr=1.0, foreach=foreach)
        assert any("duplicate parameters" in str(x.message) for x in seen)
        w.grad = torch.ones(1)
        opt.step()
        assert w.item() == -2.0
    w = nn.Parameter(torch.zeros(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = torch.optim.Adam([w, w], lr=0.1)
    w.grad = torch.ones(1)
    opt.step()
    assert int(opt.state[w]["step"]) == 2


def test_non_full_backward_hook_grads():
    lin = nn.Linear(4, 3)
    got: list = []
    lin.register_backward_hook(lambda m, gi, go: got.append([g.shape for g in gi]))
    x = torch.randn(2, 4, requires_grad=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lin(x).sum().backward()
    assert any("non-full backward hook" in str(w.message) and "missing some grad_input"
               in str(w.message) for w in seen)
    assert got == [[torch.Size([3]), torch.Size([2, 4]), torch.Size([4, 3])]]
    full: list = []
    lin2 = nn.Linear(4, 3)
    lin2.register_full_backward_hook(lambda m, gi, go: full.append(gi[0].shape))
    lin2(torch.randn(2, 4, requires_grad=True)).sum().backward()
    assert full == [torch.Size([2, 4])]


def test_frozen_norm_statistics():
    x = torch.randn(4, 3, 5) + 2
    for layer, moves in [(nn.BatchNorm1d(3), True), (nn.InstanceNorm1d(3), False),
                         (nn.InstanceNorm1d(3, track_running_stats=True), True),
                         (nn.GroupNorm(1, 3), False)]:
        model = nn.Sequential(nn.Conv1d(3, 3, 1), layer)
        model[1].requires_grad_(False)
        before = [b.clone() for b in model.buffers() if b.is_floating_point()]
        model.train()
        model(x)
        after = [b for b in model.buffers() if b.is_floating_point()]
        assert any(not torch.equal(a, b) for a, b in zip(before, after)) is moves, layer
    model[1] = nn.BatchNorm1d(3).requires_grad_(False)
    model.train()
    model[1].eval()
    before = model[1].running_mean.clone()
    model(x)
    assert torch.equal(model[1].running_mean, before)


def test_message_prefixes():
    from gradtrace.runtime.catalogue import match_message

    x = torch.randn(3, requires_grad=True)
    y = torch.sigmoid(x)
    y.mul_(2)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    assert [p.code for p in match_message(str(info.value))] == ["GT804"]
