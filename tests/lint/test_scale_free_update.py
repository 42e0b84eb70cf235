"""GT513 and optimizers that ignore a uniform scale of the gradient (NOTE [scale-free
update]). Each loop runs on real torch twice, the loss unscaled and divided by the number of
micro-batches: where the final weights agree the finding is silent; where they differ (SGD, a
coupled weight decay, a clip between backward and step) it fires at the backward."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

LOOP = """
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = {opt}
    accum = 4
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(12)]
    for i, (x, y) in enumerate(data):
        loss = nn.functional.mse_loss(model(x), y){scale}
        loss.backward()
        if (i + 1) % accum == 0:
            {clip}optimizer.step()
            optimizer.zero_grad()
    """
BACKWARD_LINE = 11
CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)\n            "

CASES = {  # id: (optimizer, clip, whether the sum changes the weights)
    "adam": ("torch.optim.Adam(model.parameters(), lr=0.01)", "", False),
    "adamw-decay": ("torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)", "",
                    False),
    "rmsprop": ("torch.optim.RMSprop(model.parameters(), lr=0.01)", "", False),
    "sgd": ("torch.optim.SGD(model.parameters(), lr=0.01)", "", True),
    "adam-coupled-decay": ("torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.1)",
                           "", True),
    "adam-decay-in-a-group": (
        "torch.optim.Adam([{'params': model.parameters(), 'weight_decay': 0.1}], lr=0.01)", "",
        True),
    "adam-clipped": ("torch.optim.Adam(model.parameters(), lr=0.01)", CLIP, True),
}


def source(opt: str, clip: str, scale: str) -> str:
    return textwrap.dedent(LOOP.format(opt=opt, clip=clip, scale=scale)).lstrip("\n")


def final_weight(text: str) -> list[float]:
    ns: dict = {}
    exec(compile(text, "<loop>", "exec"), ns)
    return ns["model"].weight.detach().flatten().tolist()


@pytest.mark.parametrize("case", sorted(CASES))
def test_gt513_fires_exactly_where_the_sum_moves_the_weights(case: str) -> None:
    opt, clip, differs = CASES[case]
    text = source(opt, clip, "")
    found = [(f.code, f.line) for f in check_source(text, "loop.py") if f.code == "GT513"]
    assert found == ([("GT513", BACKWARD_LINE)] if differs else [])
    summed, mean = final_weight(text), final_weight(source(opt, clip, " / accum"))
    gap = max(abs(a - b) for a, b in zip(summed, mean))
    assert (gap > 1e-4) is differs, gap
