"""watch() on real small models: each finding appears where it should, and only there."""
from __future__ import annotations

import torch
import torch.nn as nn

import gradtrace
from tests.watch.models import Branchy, LogNet, TwoHead, cnn, mlp, train


def _codes(w: gradtrace.runtime.watch.watcher.Watcher) -> list[str]:  # type: ignore[name-defined]
    return w.report.codes()


def test_normal_mlp_and_cnn_give_no_findings() -> None:
    torch.manual_seed(0)
    m = mlp(depth=4)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    with gradtrace.watch(m, opt, every=1) as w:
        losses = train(m, opt, 30)
    assert losses[-1] < losses[0]
    assert w.report.findings == ()
    track = w.report.tracks[0]
    assert track.total_steps == 30 and len(track.steps) == 30
    assert all(n is not None and n > 0 for n in track.steps[-1].norm)
    assert track.steps[-1].loss is not None and abs(track.steps[-1].loss - losses[-1]) < 1e-6

    c = cnn()
    opt = torch.optim.SGD(c.parameters(), lr=0.05, momentum=0.9)
    with gradtrace.watch(c, opt) as w:
        train(c, opt, 20, image=True)
    assert w.report.findings == ()
    assert w.report.tracks[0].total_steps == 20


def test_deep_sigmoid_mlp_shows_vanishing_flow() -> None:
    torch.manual_seed(0)
    m = mlp(depth=12, width=32, act=nn.Sigmoid)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 8)
    f = [f for f in w.report.findings if f.code == "GT852"]
    assert len(f) == 1, w.report.codes()
    assert "`0.weight`" in f[0].message and f[0].source == "runtime"
    assert "GT853" not in w.report.codes()
    # the same model with ReLU and 4 layers does not vanish
    m2 = mlp(depth=4)
    opt2 = torch.optim.SGD(m2.parameters(), lr=0.05)
    with gradtrace.watch(m2, opt2) as w2:
        train(m2, opt2, 8)
    assert "GT852" not in w2.report.codes()


def _log_data(bad_step: int, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    data = []
    for i in range(steps):
        x = torch.rand(16, 4, generator=g)
        if i == bad_step:
            x[3, 0] = -100.0  # makes the input of log negative in one row
        data.append((x, torch.rand(16, 1, generator=g)))
    return data


def _log_line() -> int:
    import tests.watch.models as models

    src = open(models.__file__).read().splitlines()
    return next(i for i, line in enumerate(src, 1) if "LOG-LINE" in line)


def test_log_of_negative_names_module_step_and_line() -> None:
    torch.manual_seed(0)
    m = LogNet()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 8, data=_log_data(5, 8))
    rep = w.report
    nan = [f for f in rep.findings if f.code == "GT851"]
    assert len(nan) == 1 and nan[0].severity == "error"
    src = rep.tracks[0].nan_source
    assert src is not None and src.step == 5 and src.module == "act" and src.kind == "forward"
    assert src.module_type == "LogAct"
    assert nan[0].path.endswith("tests/watch/models.py") and nan[0].line == _log_line()
    assert "step 5" in nan[0].message and "`log`" in nan[0].message
    first = {s.first_nonfinite_step for s in rep.tracks[0].summaries}
    assert first == {5}
    assert rep.tracks[0].steps[5].nonfinite[0] == 4 * 8  # every entry of fc1.weight's grad


def test_nan_without_optimizer_is_found_in_backward_mode() -> None:
    torch.manual_seed(0)
    m = LogNet()
    with gradtrace.watch(m) as w:
        train(m, None, 6, data=_log_data(2, 6))
    src = w.report.tracks[0].nan_source
    assert src is not None and (src.step, src.module, src.kind) == (2, "act", "forward")


def test_unused_head_has_never_graded_params() -> None:
    torch.manual_seed(0)
    m = TwoHead()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 5, d_in=8, d_out=2)
    f = [f for f in w.report.findings if f.code == "GT850"]
    assert len(f) == 1 and "`aux_head.weight`" in f[0].message
    assert "`head.weight`" not in f[0].message
    assert f[0].line == TwoHead.__init__.__code__.co_firstlineno - 3  # class TwoHead line
    idx = [p.name for p in w.report.tracks[0].params].index("aux_head.weight")
    assert all(s.norm[idx] is None for s in w.report.tracks[0].steps)


def test_frozen_branch_shows_no_gradient_and_no_finding() -> None:
    torch.manual_seed(0)
    m = Branchy()
    m.side.requires_grad_(False)
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.05)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 5, d_in=8, d_out=2)
    t = w.report.tracks[0]
    side = [i for i, p in enumerate(t.params) if p.name.startswith("side.")]
    assert side and all(not t.params[i].requires_grad for i in side)
    assert all(t.steps[-1].norm[i] is None for i in side)
    assert all(t.summaries[i].graded_steps == 0 for i in side)
    assert w.report.findings == ()


def test_detached_branch_is_reported_never_graded() -> None:
    torch.manual_seed(0)
    m = Branchy(detach=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 5, d_in=8, d_out=2)
    f = [f for f in w.report.findings if f.code == "GT850"]
    assert {x.message.split(":")[0] for x in f} == {"`side.0` (Linear)", "`side.2` (Linear)"}


def test_dead_relu_units_are_reported() -> None:
    torch.manual_seed(0)
    m = mlp(depth=3, width=32)
    with torch.no_grad():
        m[2].bias[:24] = -100.0  # 24 of 32 units of the second layer never activate
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 8)
    f = [f for f in w.report.findings if f.code == "GT854"]
    assert len(f) == 1 and f[0].message.startswith("`2` (Linear): 24 of 32 output units")


def test_dead_units_still_counted_after_live_biases_are_retired() -> None:
    # after 16 recorded steps, biases with no dead unit stop being accumulated; the one
    # with dead units keeps its exact count
    torch.manual_seed(0)
    m = mlp(depth=3, width=32)
    with torch.no_grad():
        m[2].bias[:24] = -100.0
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 40)
        col = w._bound[0].collector
        names = [col.infos[i].name for i in sorted(col.unit_idx)]
    assert names == ["2.bias"]  # 0.bias and 4.bias had every unit alive: retired
    s = {p.name: s for p, s in zip(w.report.tracks[0].params, w.report.tracks[0].summaries)}
    assert (s["2.bias"].units, s["2.bias"].dead_units) == (32, 24)
    assert s["0.bias"].dead_units == 0
    assert [f.code for f in w.report.findings].count("GT854") == 1


def test_stalled_updates_and_param_not_in_optimizer() -> None:
    torch.manual_seed(0)
    m = mlp(depth=3)
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 5)
    assert w.report.codes() == ["GT855"]

    m = mlp(depth=3)
    opt = torch.optim.SGD(m[0].parameters(), lr=0.05)  # forgot the other layers
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 5)
    f = [f for f in w.report.findings if f.code == "GT856"]
    assert [x.message.split(":")[0] for x in f] == ["`2` (Linear)", "`4` (Linear)"]


def test_diverging_training_is_reported_exploding() -> None:
    torch.manual_seed(0)
    m = nn.Linear(16, 4)
    opt = torch.optim.SGD(m.parameters(), lr=5.0)  # far above 2/lambda_max of this problem
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 30)
    assert "GT853" in w.report.codes()
    assert "GT851" not in w.report.codes()
