"""Session 56, the lead: early stopping that restores the best weights by rebinding the model
to a copy, under an optimizer local to ``fit()``: the optimizer stops finding gradients after
the first restore; the run sees it at the optimizer's steps while the optimizer lives (it is
gone when the run ends, and the restores fall after the armed steps) (NOTE [replaced under the
optimizer]), and the static finding on the rebinding leads, confirmed."""
from __future__ import annotations

from rt_helpers import marked_line

SRC = """
import copy
import torch
import torch.nn as nn


def fit(model, data, epochs=8, patience=1):
    opt = torch.optim.Adam(model.parameters(), lr=1.0)
    best, best_state, bad = float("inf"), copy.deepcopy(model), 0
    for epoch in range(epochs):
        for x, y in data:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = sum(nn.functional.mse_loss(model(x), y).item() for x, y in data)
        if val < best:
            best, best_state, bad = val, copy.deepcopy(model), 0
        else:
            bad += 1
            if bad > patience:
                model = copy.deepcopy(best_state)  # <- cause
                bad = 0
    return model


if __name__ == "__main__":
    torch.manual_seed(3)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    fit(nn.Linear(4, 1), data)
"""


def test_model_recreated_under_a_local_optimizer_is_named(run_script):
    res = run_script(SRC)
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT404", marked_line(SRC)), res.findings
    assert any("GT849" in r.get("message", "") for r in first.get("related", ())), first


def test_weights_reset_in_place_are_silent(run_script):
    res = run_script(SRC.replace(
        "model = copy.deepcopy(best_state)  # <- cause",
        "model.load_state_dict(best_state.state_dict())"))
    assert res.code == 0, res.err
    assert res.findings == [], res.findings
