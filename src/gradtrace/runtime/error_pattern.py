"""The record of one recognisable error (:class:`ErrorPattern`) and the runtime kinds that one
static rule describes (``STATIC_TWINS``). Torch-free; :mod:`gradtrace.runtime.catalogue` holds
the entries (NOTE [one catalogue] in :mod:`gradtrace.codes`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

# When a runtime diagnosis is the bug a static rule describes, the finding uses that rule's code
# and name: runtime kind -> (static code, static rule name). tests/runtime/test_codes.py checks
# every pair against src/gradtrace/lint/rules.
STATIC_TWINS: dict[str, tuple[str, str]] = {
    "data": ("GT105", "data-in-loss"), "detach": ("GT107", "detached-loss-term"),
    "clip-before-unscale": ("GT524", "clip-before-unscale"), "epoch-scheduler-stepped-per-batch":
        ("GT526", "epoch-scheduler-stepped-per-batch"),
    "accumulated-loss-not-scaled": ("GT513", "accumulated-loss-not-scaled"),
    "leaf-rebound-by-update": ("GT301", "leaf-rebound-by-update"), "requires-grad-on-non-leaf":
        ("GT303", "requires-grad-on-non-leaf"),
    "non-leaf-grad": ("GT307", "grad-of-non-leaf"),
    "item-rewrap": ("GT102", "python-number-in-loss"),
    "zero-grad-missing": ("GT501", "missing-zero-grad"),
    "clip-after-step": ("GT504", "clip-grad-after-step"),
    "inplace-on-leaf": ("GT302", "inplace-update-of-leaf"),
    "graph-kept": ("GT505", "loss-accumulated-with-graph"),
    "non-scalar": ("GT510", "backward-on-non-scalar-loss"),
    "no-grad-forward": ("GT201", "loss-from-no-grad-output"),
    "weight-made-non-leaf": ("GT305", "weight-made-non-leaf"),
    "none-result-assigned": ("GT511", "assigned-none-result"),
    "grad-input-unused": ("GT702", "grad-input-not-in-graph"),
    "gan-fake-not-detached": ("GT508", "gan-fake-not-detached"),
    "item-then-backward": ("GT101", "backward-on-python-number"),
    "backward-under-no-grad": ("GT207", "backward-under-no-grad"),
    "inference-tensor": ("GT204", "inference-tensor-in-training"),
    "optimizer-non-leaf": ("GT306", "non-leaf-given-to-optimizer"),
    "optimizers-swapped": ("GT406", "optimizers-share-parameters"),
    "parameters-stepped-twice": ("GT406", "optimizers-share-parameters"),
    "model-left-in-eval-mode": ("GT516", "model-left-in-eval-mode"),
    "checkpoint-no-grad": ("GT205", "checkpoint-input-without-grad"),
    "unregistered-submodule": ("GT401", "modules-in-plain-container"),
    "unfrozen-after-optimizer": ("GT410", "unfrozen-after-optimizer"),
    "parameter-replaced-after-ddp-wrap": ("GT614", "parameter-replaced-after-ddp-wrap"),
    "ddp-wraps-frozen-module": ("GT456", "ddp-wraps-frozen-module"),
    "non-differentiable-op": ("GT108", "non-differentiable-loss-path"),
    "probabilities-into-cross-entropy": ("GT758", "probabilities-into-cross-entropy"),
    "graph-copied-into-new-leaf": ("GT104", "tensor-rebuilt-from-graph"),
    "residual-minus-straight-through": ("GT130", "residual-minus-straight-through"),
    "grad-mode-left-off": ("GT203", "set-grad-enabled-never-restored"),
    "inference-mode-forward": ("GT204", "inference-tensor-in-training"),
    "graph-reused-across-steps": ("GT507", "graph-reused-across-steps"),
    "state-carried-across-steps": ("GT506", "hidden-state-not-detached"),
    "function-grad-count": ("GT701", "backward-gradient-count-mismatch"),
    "function-grad-arguments": ("GT135", "backward-grad-arguments-mismatch"),
    "tensor-op-result-discarded": ("GT708", "tensor-op-result-discarded"),
    "out-argument-requires-grad": ("GT604", "out-argument-requires-grad"),
    "inplace-on-saved-tensor": ("GT602", "inplace-write-to-saved-output"),
    "step-between-backwards": ("GT601", "optimizer-step-between-backwards"),
    "requires-grad-on-integer": ("GT304", "requires-grad-on-integer-tensor"),
    "legacy-autograd-function": ("GT705", "legacy-autograd-function-called"),
    "requires-grad-attribute": ("GT407", "requires-grad-attribute-on-module"),
    "zero-grad-before-step": ("GT503", "zero-grad-between-backward-and-step"),
    "scheduler-before-step": ("GT515", "scheduler-step-before-optimizer-step"),
    "parameters-generator-consumed": ("GT405", "parameters-generator-consumed"),
    "learnable-tensor-attribute": ("GT402", "learnable-tensor-as-plain-attribute"),
    "model-recreated-after-optimizer": ("GT404", "model-recreated-after-optimizer"),
    "backward-through-freed-graph": ("GT509", "backward-twice-without-retain-graph"),
    "zero-grad-every-accumulation-step": ("GT512", "zero-grad-every-accumulation-step"),
    "parameters-listed-twice": ("GT435", "parameters-listed-twice"),
    "clip-of-consumed-generator": ("GT405", "parameters-generator-consumed"),
    "grad-without-create-graph": ("GT206", "gradient-penalty-without-create-graph"),
}


@dataclass(frozen=True)
class ErrorPattern:
    """One recognisable error: regex on a stable prefix, code (its entry: gradtrace.codes), and
    the words to explain it."""

    key: str
    regex: str
    code: str
    title: str
    explanation: str
    fix: str
    repro: str
    twin: str = ""  # a STATIC_TWINS kind when one static rule always describes this error
    # the code of the finding made when this entry's evidence is found, when that finding is a
    # diagnosis of its own (its entry in code_tables) rather than the error's entry ``code``
    diagnosis: str = ""

    def search(self, text: str) -> re.Match[str] | None:
        return re.search(self.regex, text)

    @property
    def finding_code(self) -> str:
        """The code a finding about this error gets when nothing more specific is known."""
        twin = STATIC_TWINS.get(self.twin)
        return twin[0] if twin else self.code


_TWIN_OF = {"non-scalar": "non-scalar", "backward-twice": "backward-through-freed-graph",
            "inplace-saved": "inplace-on-saved-tensor", "inplace-leaf": "inplace-on-leaf",
            "number-backward": "item-then-backward", "inference-saved": "inference-tensor",
            "optimizer-non-leaf": "optimizer-non-leaf", "function-grad-count":
            "function-grad-count", "grad-unused-input": "grad-input-unused",
            "none-assigned": "none-result-assigned", "non-leaf-grad-warning": "non-leaf-grad",
            "out-requires-grad": "out-argument-requires-grad",
            "legacy-function": "legacy-autograd-function",
            "requires-grad-dtype": "requires-grad-on-integer",
            "requires-grad-non-leaf": "requires-grad-on-non-leaf"}


def pattern_entry(key: str, regex: str, code: str, title: str, explanation: str, fix: str,
                  repro: str, twin: str = "", diagnosis: str = "") -> ErrorPattern:
    """An entry with its prose folded to single spaces (``twin``: a STATIC_TWINS kind;
    ``diagnosis``: ErrorPattern.diagnosis)."""
    return ErrorPattern(key, regex, code, title, " ".join(explanation.split()),
                        " ".join(fix.split()), repro.strip("\n") + "\n",
                        twin or _TWIN_OF.get(key, ""), diagnosis)


HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
