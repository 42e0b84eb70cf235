"""GT850-GT856 and GT859-GT869: what :func:`gradtrace.watch` reports over a training run.

:mod:`gradtrace.runtime.watch.analysis` turns the statistics the watcher collected into these findings.
"""
from __future__ import annotations

from gradtrace.code_tables import Code

_ANALYSIS = "gradtrace.runtime.watch.analysis"

CODES = (
    Code("GT850", "parameter-never-graded",
         "A trainable parameter received no gradient (None or all zeros) at any watched step, "
         "so it never trains.",
         "Its module is not on the path to the loss (unused branch, a cut, a frozen parent), "
         "or everything upstream of it multiplies its gradient by zero.",
         """
         with gradtrace.watch(model, optimizer):
             loss = F.mse_loss(model.head(x), y)  # model.extra never runs
         """,
         """
         with gradtrace.watch(model, optimizer):
             loss = F.mse_loss(model.head(model.extra(x)), y)
         """,
         "Use the module in forward, remove it, or freeze it on purpose (`requires_grad_(False)`).",
         _ANALYSIS, severity="warning"),
    Code("GT851", "gradients-became-non-finite",
         "Gradients became NaN or Inf; the finding names the first step and, when it can be "
         "replayed, the module and line whose forward produced the first non-finite value.",
         "One NaN in a gradient spreads through the optimizer into every weight it touches; the "
         "first step and the first module that produced it are where to look.",
         "loss = torch.log(model(x)).mean()",
         "loss = torch.log(model(x).clamp(min=1e-8)).mean()",
         "Guard the op named in the finding (log or sqrt of 0, division by 0, overflow in "
         "half precision), lower the learning rate, or clip gradients.",
         _ANALYSIS),
    Code("GT852", "vanishing-gradient",
         "Gradients shrink by orders of magnitude from the output side to the input side of the "
         "model, so the early layers barely train.",
         "Each layer multiplies the gradient by its local derivative; saturating activations "
         "(sigmoid, tanh) and deep stacks without normalisation or residual paths make the "
         "product tiny.",
         "model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.Sigmoid()) for _ in range(20)])",
         "model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(20)])",
         "Use non-saturating activations, normalisation, residual connections or a better "
         "initialisation.", _ANALYSIS, severity="warning"),
    Code("GT853", "exploding-gradient",
         "Gradient norms grow by orders of magnitude over training or across depth.",
         "Large gradients make steps overshoot; training diverges and usually ends in NaN.",
         "opt = torch.optim.SGD(model.parameters(), lr=10.0)",
         "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
         "# and clip_grad_norm_(model.parameters(), 1.0) before opt.step()",
         "Lower the learning rate, clip gradient norms, or normalise the layers.",
         _ANALYSIS, severity="warning"),
    Code("GT854", "dead-units",
         "Many output units of a layer received an exactly zero gradient at every watched step "
         "(typically ReLU units whose input is negative for every example).",
         "A ReLU whose input is negative for every example passes no gradient back, so the "
         "weights feeding it never change again.",
         "layer = nn.Linear(64, 64); nn.init.constant_(layer.bias, -10.0); act = nn.ReLU()",
         "layer = nn.Linear(64, 64); act = nn.LeakyReLU(0.01)",
         "Lower the learning rate, use LeakyReLU/GELU, or check the initialisation of biases.",
         _ANALYSIS, severity="warning"),
    Code("GT855", "stalled-updates",
         "A parameter has non-zero gradients but the optimizer step never changes it (zero "
         "learning rate, or updates below float precision).",
         "The update `lr * grad` is 0 or smaller than the spacing of floats around the "
         "weight's value, so the stored weight stays the same.",
         "opt = torch.optim.SGD(model.parameters(), lr=1e-12)",
         "opt = torch.optim.SGD(model.parameters(), lr=1e-3)",
         "Raise the learning rate (check the scheduler too), or keep master weights in float32.",
         _ANALYSIS, severity="warning"),
    Code("GT856", "graded-parameter-not-in-optimizer",
         "A parameter receives gradients but is not in the watched optimizer, so it is never "
         "updated.",
         "The optimizer was given a subset of the parameters, or built before the parameter "
         "was created.",
         "opt = torch.optim.SGD(model.encoder.parameters(), lr=0.1)",
         "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
         "Give the optimizer every trained parameter, or freeze the ones left out.",
         _ANALYSIS, severity="warning"),
)
