"""watch() never changes training, cleans up after itself, and keeps bounded memory."""
from __future__ import annotations

import gc
import weakref

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.runtime.watch.watcher import watch_all
from gradtrace.runtime.watch.collect import History
from tests.watch.models import LogNet, TwoHead, cnn, mlp, train


def _hook_state(model: nn.Module, opt: torch.optim.Optimizer | None) -> tuple[int, ...]:
    import torch.nn.modules.module as mm
    import torch.optim.optimizer as oo

    mods = list(model.modules())
    n_mod = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
                for m in mods)
    n_par = sum(len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) +
                len(getattr(p, "_backward_hooks", None) or {}) for p in model.parameters())
    n_opt = (len(opt._optimizer_step_pre_hooks) + len(opt._optimizer_step_post_hooks)
             if opt is not None else 0)
    n_glob = (len(mm._global_forward_hooks) + len(mm._global_forward_pre_hooks) +
              len(oo._global_optimizer_pre_hooks) + len(oo._global_optimizer_post_hooks))
    return n_mod, n_par, n_opt, n_glob


def _run(seed: int, watched: bool, opt_kind: str, mode: str) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                      nn.Linear(32, 4))
    opt = (torch.optim.Adam(m.parameters(), lr=1e-2) if opt_kind == "adam"
           else torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9))
    if watched:
        with gradtrace.watch(m, opt if mode == "optimizer" else None) as w:
            train(m, opt, 20)
        assert w.report.tracks[0].total_steps == 20
    else:
        train(m, opt, 20)
    return [t.detach().clone() for t in list(m.parameters()) + list(m.buffers())]


@pytest.mark.parametrize("opt_kind,mode", [("adam", "optimizer"), ("sgd", "backward")])
def test_watching_changes_no_parameter_bit(opt_kind: str, mode: str) -> None:
    plain = _run(3, False, opt_kind, mode)
    watched = _run(3, True, opt_kind, mode)
    assert len(plain) == len(watched)
    for a, b in zip(plain, watched):
        assert torch.equal(a, b)  # bitwise: same values, same NaN pattern, same dtype


def test_nan_replay_does_not_touch_training_rng_or_params() -> None:
    def run(watched: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        torch.manual_seed(0)
        m = LogNet()
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        from tests.watch.test_watch_findings import _log_data
        data = _log_data(2, 4)
        if watched:
            with gradtrace.watch(m, opt) as w:
                train(m, opt, 4, data=data)
            assert w.report.tracks[0].nan_source is not None
        else:
            train(m, opt, 4, data=data)
        return torch.rand(3), [p.detach().clone() for p in m.parameters()]
    r1, p1 = run(False)
    r2, p2 = run(True)
    assert torch.equal(r1, r2)
    assert all(torch.equal(a, b) or (a.isnan().all() and b.isnan().all()) for a, b in zip(p1, p2))


@pytest.mark.parametrize("with_opt", [True, False])
def test_all_hooks_removed_after_close_and_on_exception(with_opt: bool) -> None:
    m = TwoHead()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    before = _hook_state(m, opt)
    w = gradtrace.watch(m, opt if with_opt else None)
    assert _hook_state(m, opt) != before
    train(m, opt, 2, d_in=8, d_out=2)
    w.close()
    assert _hook_state(m, opt) == before
    assert w.report.tracks[0].total_steps == 2

    with pytest.raises(RuntimeError, match="boom"):
        with gradtrace.watch(m, opt if with_opt else None):
            train(m, opt, 1, d_in=8, d_out=2)
            raise RuntimeError("boom")
    assert _hook_state(m, opt) == before


def test_watch_all_hooks_removed_on_exception() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    before = _hook_state(m, opt)
    with pytest.raises(KeyError):
        with watch_all():
            train(m, opt, 2)
            raise KeyError("x")
    assert _hook_state(m, opt) == before


def test_watch_keeps_no_tensor_alive() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 3)
    ref = weakref.ref(m.state_dict()["0.weight"])
    wref = weakref.ref(m[0].weight)
    del m, opt
    gc.collect()
    assert wref() is None and ref() is None
    assert w.report.tracks[0].total_steps == 3  # the report outlives the model


def test_history_is_bounded_over_ten_thousand_steps() -> None:
    h = History(capacity=16)
    from gradtrace.report.model import StepRecord
    for i in range(10_000):
        if h.wants(i):
            h.add(i, StepRecord(i, None, (), (), (), (), (), ()))
    assert len(h.items) <= 16 and h.stride == 1024
    steps = [r.step for r in h.items]
    assert steps[0] == 0 and steps[-1] >= 10_000 - 2 * h.stride  # still spans the whole run

    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with gradtrace.watch(m, opt, every=1, history=4) as w:
        train(m, opt, 40)
    t = w.report.tracks[0]
    assert t.total_steps == 40 and len(t.steps) <= 5 and t.steps[-1].step == 39


def test_every_n_records_only_every_nth_step() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with gradtrace.watch(m, opt, every=3) as w:
        train(m, opt, 10)
    t = w.report.tracks[0]
    assert [s.step for s in t.steps] == [0, 3, 6, 9]
    assert t.recorded_steps == 4


def test_update_ratio_matches_sgd_and_backward_mode() -> None:
    torch.manual_seed(0)
    m = nn.Linear(16, 4)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 3)
    s = w.report.tracks[0].steps[-1]
    # plain SGD: ||update|| = lr * ||grad||
    assert s.update_norm[0] == pytest.approx(0.1 * s.norm[0], rel=1e-4)
    # ... measured against the weight before the step
    before = m.weight.detach() + 0.1 * m.weight.grad
    assert s.weight_norm[0] == pytest.approx(float(before.norm()), rel=1e-6)

    m2 = mlp()
    with gradtrace.watch(m2) as w2:  # no optimizer: one step per backward
        train(m2, None, 4)
    t = w2.report.tracks[0]
    assert t.total_steps == 4 and not t.has_optimizer
    # the update applied after a backward belongs to that step (manual SGD, lr 0.05) ...
    for s in t.steps[:3]:
        assert s.update_norm[0] == pytest.approx(0.05 * s.norm[0], rel=1e-4)
    assert t.steps[3].update_norm[0] is None  # ... and the last one was never seen


def test_large_tensors_exact_norm_and_max_sampled_zeros_and_update() -> None:
    # 200 x 300 = 60,000 entries: above the sample size, so zeros and updates are sampled
    torch.manual_seed(0)
    m = nn.Linear(300, 200, bias=False)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    mask = (torch.arange(200) % 2).float()  # every other output row gets no gradient
    x = torch.randn(8, 300)
    with gradtrace.watch(m, opt) as w:
        opt.zero_grad()
        (m(x) * mask).pow(2).sum().backward()
        g = m.weight.grad.clone()
        w_before = m.weight.detach().clone()
        opt.step()
    s = w.report.tracks[0].steps[0]
    assert s.norm[0] == pytest.approx(float(g.norm()), rel=1e-6)
    assert s.max_abs[0] == pytest.approx(float(g.abs().max()), rel=1e-6)
    assert s.zero_frac[0] == pytest.approx(0.5, abs=0.05)
    assert s.update_norm[0] == pytest.approx(0.1 * float(g.norm()), rel=0.1)
    assert s.weight_norm[0] == pytest.approx(float(w_before.norm()), rel=0.05)


@pytest.mark.parametrize("dtypes", [(torch.float32,), (torch.float64,), (torch.bfloat16,),
                                    (torch.float32, torch.float64)],
                         ids=["float32", "float64", "bfloat16", "mixed"])
def test_gradient_values_equal_torch_for_every_dtype(dtypes: tuple[torch.dtype, ...]) -> None:
    # float32/float64 go through the one-buffer path, bfloat16 and mixed dtypes through the
    # per-tensor one: both must report what torch computes
    torch.manual_seed(0)
    layers = [nn.Linear(60, 60).to(dtypes[k % len(dtypes)]) for k in range(3)]  # <= tensors.SAMPLE
    m = nn.Sequential(*layers)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def forward(x: torch.Tensor) -> torch.Tensor:
        for layer in layers:
            x = torch.relu(layer(x.to(layer.weight.dtype)))
        return x.float().pow(2).sum()

    with gradtrace.watch(m, opt) as w:
        opt.zero_grad()
        forward(torch.randn(16, 60)).backward()
        grads = [p.grad.clone() for p in m.parameters()]
        opt.step()
    s = w.report.tracks[0].steps[0]
    for i, g in enumerate(grads):
        rel = 1e-2 if g.dtype == torch.bfloat16 else 1e-5
        assert s.norm[i] == pytest.approx(float(g.double().norm()), rel=rel)
        assert s.max_abs[i] == float(g.abs().max())
        assert s.zero_frac[i] == pytest.approx(float((g == 0).double().mean()), abs=1e-9)
        assert s.nonfinite[i] == 0


def test_fused_gpu_path_for_max_abs_gives_the_same_values(monkeypatch) -> None:
    from gradtrace.runtime.watch import tensors as watch_tensors

    def run() -> list[tuple]:
        torch.manual_seed(0)
        m = mlp()
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        with gradtrace.watch(m, opt) as w:
            train(m, opt, 3)
        return [s.max_abs for s in w.report.tracks[0].steps]

    per_tensor = run()
    monkeypatch.setattr(watch_tensors, "_FUSED_PEAKS", frozenset({"cpu"}))
    fused = run()
    assert fused == per_tensor and all(v > 0 for v in fused[0])


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_watch_records_no_graph_and_restores_grad_mode() -> None:
    torch.manual_seed(0)
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    w = gradtrace.watch(m, opt)
    try:
        opt.zero_grad()
        m(torch.randn(8, 16)).pow(2).sum().backward(create_graph=True)  # grads need grad
        opt.step()
        assert torch.is_grad_enabled()
        col = w._bound[0].collector
        held = list(col.snap or []) + list(col.unit_acc.values())
        assert held and not any(t.requires_grad for t in held)
    finally:
        w.close()
    for p in m.parameters():
        p.grad = None  # create_graph grads reference the parameters: drop the cycle
    assert w.report.tracks[0].steps[0].norm[0] > 0


def test_a_long_watch_holds_a_bounded_number_of_objects() -> None:
    # records, tensors and other objects the watch holds stop growing once the history is full
    from gradtrace.report.model import StepRecord

    def live() -> tuple[int, int]:
        gc.collect()
        objs = gc.get_objects()
        return (sum(type(o) is StepRecord for o in objs),
                sum(type(o) in (torch.Tensor, nn.Parameter) for o in objs))

    torch.manual_seed(0)
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    counts = []
    before, _ = live()  # records other tests' reports still hold
    with gradtrace.watch(m, opt, history=16):
        for i in range(1, 301):  # the history (16) is full long before the first count
            opt.zero_grad()
            nn.functional.mse_loss(m(x), y).backward()
            opt.step()
            if i in (100, 300):
                counts.append(live())
    (records_100, tensors_100), (records_300, tensors_300) = counts
    assert records_300 - before <= 17 + 1 and records_100 - before <= 17 + 1  # history + last
    assert tensors_300 == tensors_100


def test_update_norms_with_weights_of_two_dtypes() -> None:
    # float32 and float64 weights land in two row buffers; each norm goes back to its weight
    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.mid = nn.Module()
            self.mid.s = nn.Parameter(torch.ones(3, dtype=torch.float64))
            self.b = nn.Linear(8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x)) * self.mid.s.sum().float()

    torch.manual_seed(0)
    m = Mixed()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with gradtrace.watch(m, opt) as w:
        for _ in range(2):
            opt.zero_grad()
            m(torch.randn(4, 8)).pow(2).sum().backward()
            opt.step()
    t = w.report.tracks[0]
    s = t.steps[-1]
    assert [p.name for p in t.params][2] == "mid.s"  # between float32 weights
    for i in range(len(t.params)):
        assert s.update_norm[i] == pytest.approx(0.1 * s.norm[i], rel=1e-5), t.params[i].name


def test_update_of_a_weight_rebound_by_the_optimizer_is_measured() -> None:
    # an optimizer that assigns ``p.data = ...`` (SAM-style implementations do) leaves the
    # views taken before the step on the old storage: the update must come from the new one
    class Rebind(torch.optim.Optimizer):
        def __init__(self, params: object, lr: float) -> None:
            super().__init__(params, {"lr": lr})

        @torch.no_grad()
        def step(self, closure: object = None) -> None:
            for group in self.param_groups:
                for p in group["params"]:
                    p.data = p.data - group["lr"] * p.grad

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(100, 80), nn.ReLU(), nn.Linear(80, 3))  # 8,000 > tensors.SAMPLE
    opt = Rebind(m.parameters(), lr=0.1)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 3, d_in=100, d_out=3)
    for s in w.report.tracks[0].steps:
        for i, (u, n) in enumerate(zip(s.update_norm, s.norm)):
            assert u == pytest.approx(0.1 * n, rel=0.3 if i == 0 else 1e-4), i
    assert not any(f.code == "GT855" for f in w.report.findings)


def test_channels_last_tensors_are_sampled_in_place() -> None:
    from gradtrace.runtime.watch.tensors import geometry, sample

    t = torch.randn(8, 64, 16, 16).to(memory_format=torch.channels_last)
    geom = geometry(t.numel())
    s = sample(t, geom)
    assert s.data_ptr() == t.data_ptr()  # a view, not a copy of the whole tensor
    memory = t.permute(0, 2, 3, 1).reshape(-1, 512)  # the entries in memory order
    assert torch.equal(s, memory[:: geom[1][0] // 512])
    gappy = torch.randn(8, 64, 16, 32)[..., ::2]  # every other entry: a copy is needed
    assert sample(gappy, geom).shape == s.shape


def test_gradient_outside_the_sample_is_not_a_zero_gradient_step() -> None:
    # 200 x 400 weight: the sample reads chunks 0, 3, 6, ... of 512 entries; row 2
    # (entries 800-1199) lies in chunks 1-2, so the sample sees only zeros
    m = nn.Linear(400, 200, bias=False)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with gradtrace.watch(m, opt) as w:
        opt.zero_grad()
        m(torch.randn(4, 400))[:, 2].sum().backward()
        opt.step()
    t = w.report.tracks[0]
    assert t.steps[0].norm[0] > 0
    assert t.steps[0].zero_frac[0] < 1.0
    assert t.summaries[0].zero_grad_steps == 0 and t.summaries[0].graded_steps == 1


def test_embedding_rows_outside_the_sample_are_not_a_stalled_update() -> None:
    # 1000 x 64 embedding: sampled in chunks of 8 rows; rows 8-15 are never in the sample
    torch.manual_seed(0)
    emb = nn.Embedding(1000, 64)
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    with gradtrace.watch(emb, opt) as w:
        for _ in range(5):
            opt.zero_grad()
            emb(torch.tensor([9, 10, 12])).pow(2).sum().backward()
            opt.step()
    s = w.report.tracks[0].summaries[0]
    assert (s.graded_steps, s.zero_grad_steps, s.zero_update_steps) == (5, 0, 0)
    assert "GT855" not in {f.code for f in w.report.findings}


def test_loss_is_seen_from_loss_modules_and_observe_loss() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with gradtrace.watch(m, opt) as w:
        losses = train(m, opt, 3, loss_fn=nn.SmoothL1Loss())
    assert [s.loss for s in w.report.tracks[0].steps] == pytest.approx(losses)

    with gradtrace.watch(m, opt) as w:
        x = torch.randn(4, 16)
        loss = (m(x) ** 2).mean()  # functional loss: invisible ...
        loss.backward()
        opt.step()
        x = torch.randn(4, 16)
        loss = (m(x) ** 2).mean()
        w.observe_loss(loss)  # ... unless given
        loss.backward()
        opt.step()
    assert [s.loss for s in w.report.tracks[0].steps] == [None, pytest.approx(loss.item())]


def test_watch_all_finds_models_through_their_optimizers() -> None:
    def user_script() -> None:  # the models never reach gradtrace directly
        torch.manual_seed(0)
        a, b = TwoHead(), cnn()
        oa = torch.optim.SGD(a.parameters(), lr=0.05)
        ob = torch.optim.Adam(b.parameters(), lr=1e-3)
        train(a, oa, 6, d_in=8, d_out=2)
        train(b, ob, 4, image=True)

    with watch_all() as w:
        user_script()
    rep = w.report
    assert sorted(t.name for t in rep.tracks) == ["Sequential", "TwoHead"]
    two = next(t for t in rep.tracks if t.name == "TwoHead")
    assert [p.name for p in two.params][:2] == ["body.0.weight", "body.0.bias"]
    assert two.total_steps == 6
    assert [f.code for f in rep.findings] == ["GT850"]
    assert "aux_head" in rep.findings[0].message


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="expects an nn.Module"):
        gradtrace.watch("model")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="every must be a positive int"):
        gradtrace.watch(mlp(), every=0)


def test_nan_replay_under_trace_is_invisible_to_the_tracer() -> None:
    from tests.watch.models import LogNet
    from tests.watch.test_watch_findings import _log_data

    def run(watched: bool) -> tuple[list[str], object]:
        torch.manual_seed(0)
        m = LogNet()
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        src = None
        with gradtrace.trace() as tr:
            if watched:
                with gradtrace.watch(m, opt) as w:
                    train(m, opt, 4, data=_log_data(2, 4))
                src = w.report.tracks[0].nan_source
            else:
                train(m, opt, 4, data=_log_data(2, 4))
        return sorted(f"{f.code}:{f.line}" for f in tr.findings), src

    plain, _ = run(False)
    watched, src = run(True)
    assert watched == plain
    assert src is not None and (src.step, src.module, src.kind) == (2, "act", "forward")


def test_model_inputs_are_held_weakly() -> None:
    class KW(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.lin(x * mask)

    m = KW()
    with gradtrace.watch(m) as w:
        x, mask = torch.randn(3, 4), torch.ones(3, 4)
        m(x, mask=mask).sum().backward()
        refs = weakref.ref(x), weakref.ref(mask)
        del x, mask
        gc.collect()
        assert refs[0]() is None and refs[1]() is None
    assert w.report.tracks[0].total_steps == 1


def test_param_frozen_after_watch_started_counts_as_frozen() -> None:
    m = TwoHead()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    with gradtrace.watch(m, opt) as w:
        m.aux_head.requires_grad_(False)  # frozen on purpose once watching started
        train(m, opt, 3, d_in=8, d_out=2)
    assert w.report.findings == ()
    t = w.report.tracks[0]
    assert not t.params[[p.name for p in t.params].index("aux_head.weight")].requires_grad
