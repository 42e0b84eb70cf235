"""Codes of the findings made by :func:`gradtrace.watch` (runtime, GT850-GT899), as data.

Torch-free, so that ``gradtrace rules`` and the docs can list them without importing torch.
"""
from __future__ import annotations

# code -> (kebab-case name of the problem, one-line summary)
WATCH_CODES: dict[str, tuple[str, str]] = {
    "GT850": ("parameter-never-graded",
              "A trainable parameter received no gradient (None or all zeros) at any watched "
              "step, so it never trains."),
    "GT851": ("non-finite-gradient",
              "Gradients became NaN or Inf; the finding names the first step and, when it can "
              "be replayed, the module and line whose forward produced the first non-finite "
              "value."),
    "GT852": ("vanishing-gradient",
              "Gradients shrink by orders of magnitude from the output side to the input side "
              "of the model, so the early layers barely train."),
    "GT853": ("exploding-gradient",
              "Gradient norms grow by orders of magnitude over training or across depth."),
    "GT854": ("dead-units",
              "Many output units of a layer received an exactly zero gradient at every watched "
              "step (typically ReLU units whose input is negative for every example)."),
    "GT855": ("stalled-updates",
              "A parameter has non-zero gradients but the optimizer step never changes it "
              "(zero learning rate, or updates below float precision)."),
    "GT856": ("graded-parameter-not-in-optimizer",
              "A parameter receives gradients but is not in the watched optimizer, so it is "
              "never updated."),
}


def name_of(code: str) -> str:
    """The kebab-case name of a watch code."""
    return WATCH_CODES[code][0]
