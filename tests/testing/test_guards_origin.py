"""Guards name where a float loss came from, also without a trace (issue 15)."""
from __future__ import annotations

import pytest
import torch

from gradtrace.guards import safe_backward


def _loss_as_number(m: torch.nn.Module) -> float:
    return m(torch.randn(2, 3)).sum().item()


def test_safe_backward_type_error_names_the_assignment_of_the_float() -> None:
    m = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss = _loss_as_number(m)
    line = test_safe_backward_type_error_names_the_assignment_of_the_float.__code__\
        .co_firstlineno + 3
    with pytest.raises(TypeError) as info:
        safe_backward(loss, opt)
    assert f"It was assigned at tests/testing/test_guards_origin.py:{line} " \
           "(`loss = _loss_as_number(m)`)" in str(info.value).replace("\\", "/")
