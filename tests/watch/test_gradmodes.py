"""compare_grad_modes measures per model instead of claiming a fixed saving."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import gradtrace


def test_compare_grad_modes_measures_and_restores_state() -> None:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.1),
                      nn.Linear(256, 10))
    x = torch.randn(32, 64)
    before = [b.clone() for b in m.buffers()]
    rng = torch.get_rng_state()
    res = gradtrace.compare_grad_modes(m, x, repeat=3)
    assert [r.mode for r in res.rows] == ["grad", "no_grad", "inference_mode"]
    assert all(r.time_ms > 0 for r in res.rows)
    # grad mode keeps activations for backward: at least the 32x256 inputs of the 2nd Linear
    assert res.row("grad").saved_mb >= 32 * 256 * 4 / 2**20
    assert res.row("no_grad").saved_mb == 0 and res.row("inference_mode").saved_mb == 0
    # memory: the graph holds activations while the output lives; without grad nothing is held
    assert res.row("grad").held_mb > 0 and res.row("no_grad").held_mb < 0.01
    assert res.row("grad").peak_mb >= res.row("no_grad").peak_mb > 0
    assert all(torch.equal(a, b) for a, b in zip(before, m.buffers()))  # BN stats restored
    assert torch.equal(rng, torch.get_rng_state())  # dropout did not consume the user's RNG
    text = str(res)
    assert "inference_mode" in text and "saved MB" in text and "peak MB" in text
    assert isinstance(res.saving("no_grad"), float)


def test_compare_grad_modes_accepts_tuple_and_dict_inputs() -> None:
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
            return self.a(x) * scale

    m = Two()
    assert gradtrace.compare_grad_modes(m, (torch.ones(2, 4), 2.0), repeat=1).row("grad")
    assert gradtrace.compare_grad_modes(m, {"x": torch.ones(2, 4)}, repeat=1).repeat == 1
    with pytest.raises(TypeError, match="expects an nn.Module"):
        gradtrace.compare_grad_modes(lambda x: x, torch.ones(1))  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="unknown mode 'fast'"):
        gradtrace.compare_grad_modes(m, torch.ones(2, 4), repeat=1).row("fast")
