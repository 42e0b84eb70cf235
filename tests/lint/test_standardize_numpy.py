"""GT776 and NumPy: a training script that standardises its data with `np.mean`/`np.std`
before making tensors is not reported (nothing is differentiated through NumPy, and a whole
dataset's deviation is not 0; session 32's re-run of the earlier unseen corpora: rasbt's
book code, EEG-Conformer); the same standardisation of a tensor inside the loss still is."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source

SCRIPT = """
    import numpy as np
    import torch
    from torch import nn

    X_train = np.random.rand(64, 3).astype("float32")
    y_train = np.random.rand(64, 1).astype("float32")
    X_train = (X_train - np.mean(X_train, axis=0)) / np.std(X_train, axis=0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.from_numpy(X_train), torch.from_numpy(y_train)
    for _ in range(3):
        out = model(x)
        {adv}
        loss = ((out - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """


def gt776(adv: str) -> list[int]:
    text = textwrap.dedent(SCRIPT.format(adv=adv)).lstrip("\n")
    return [f.line for f in check_source(text, "train.py") if f.code == "GT776"]


def test_numpy_standardised_data_is_silent() -> None:
    assert gt776("pass") == []


def test_tensor_standardised_in_the_loop_is_reported() -> None:
    assert gt776("out = (out - out.mean()) / out.std()") == [13]
