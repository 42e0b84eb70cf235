"""The checker's list of tensor attribute names (lint/tensor_api.py) matches torch."""
from __future__ import annotations

import pytest

from gradtrace.lint.tensor_api import TENSOR_ATTRS

torch = pytest.importorskip("torch")

# regenerate: sorted(n for n in set(dir(torch.Tensor)) | set(dir(torch.nn.Parameter))
#                    if not n.startswith("__"))


def test_covers_the_installed_tensor_api() -> None:
    names = {n for n in dir(torch.Tensor) if not n.startswith("__")}
    missing = names - TENSOR_ATTRS
    assert len(missing) <= len(names) // 100, sorted(missing)[:20]
    assert {"data", "grad", "shape", "detach", "requires_grad", "T"} <= TENSOR_ATTRS
    assert not {"edge_index", "logits", "loss", "y", "input_ids"} & TENSOR_ATTRS
