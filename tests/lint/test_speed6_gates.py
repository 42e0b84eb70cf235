"""Gates that skip work where a rule cannot fire (speed6): each keeps the findings it had."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _codes(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), select=[code])]


# GT757 visits only the functions whose code holds a NaN test (`gate_statements = "function"`):
# the test may be spelled `r != r`, with the file's `isnan` in another function.
NE_TEST = """
    import torch

    def clean(x):
        return x[~torch.isnan(x)]

    def smape(pred, target):
        ratio = torch.abs(pred - target) / (torch.abs(pred) + torch.abs(target))
        return ratio[ratio == ratio].mean() + ratio[~(ratio != ratio)].sum()

    def train_step(model, x, y, opt):
        smape(model(x), y).backward()
        opt.step()
"""

# the same filter through a mask named in the same function, the test call on another line
MASK_TEST = """
    import torch

    def smape(pred, target):
        ratio = torch.abs(pred - target) / (torch.abs(pred) + torch.abs(target))
        bad = torch.isnan(ratio)
        return ratio[~bad].mean()

    def train_step(model, x, y, opt):
        smape(model(x), y).backward()
        opt.step()
"""

# look-alike: the division is guarded before the filter; the file tests for NaN elsewhere
GUARDED = """
    import torch

    def clean(x):
        return x[~torch.isnan(x)]

    def smape(pred, target):
        den = (torch.abs(pred) + torch.abs(target)).clamp_min(1e-8)
        ratio = torch.abs(pred - target) / den
        return ratio[ratio != ratio].mean()

    def train_step(model, x, y, opt):
        smape(model(x), y).backward()
        opt.step()
"""


def test_gt757_not_equal_test_in_a_function_without_the_word() -> None:
    assert _codes(NE_TEST, "GT757") == [("GT757", 8)]


def test_gt757_mask_bound_in_the_same_function() -> None:
    assert _codes(MASK_TEST, "GT757") == [("GT757", 5)]


def test_gt757_guarded_division_is_silent() -> None:
    assert _codes(GUARDED, "GT757") == []
