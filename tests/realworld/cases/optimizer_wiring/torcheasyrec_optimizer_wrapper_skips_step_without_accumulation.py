"""TorchEasyRec's TZRecOptimizer wraps the real optimizer for gradient accumulation and only forwards `step()` (and `zero_grad()`) when `gradient_accumulation_steps > 1 and step % gradient_accumulation_steps == 0`; with the default of no accumulation the condition is never true, so the training loop's `optimizer.step()` never reaches the wrapped SGD and no parameter of the ranking model is ever updated, with no error.

source: https://github.com/alibaba/TorchEasyRec/pull/226
kind: bug
symptom: silent
verified: after 5 epochs of `_train_and_evaluate` with the default `gradient_accumulation_steps=0`, every parameter of the model is bit-identical to its initial value (max abs change 0.0) and the loss on the data stays at 0.702; in the look-alike (`<= 1 or ...`) the parameters move (max abs change 0.22) and the loss falls to 0.679
"""
from typing import Any, Optional

import torch
import torch.nn as nn


class OptimizerWrapper:
    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self._optimizer = optimizer
        self.param_groups = optimizer.param_groups

    def zero_grad(self, set_to_none: bool = False) -> None:
        self._optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure: Any = None) -> None:
        self._optimizer.step(closure=closure)


class TZRecOptimizer(OptimizerWrapper):
    """TorchEasyRec optimizer wrapper, for gradient accumulate / gradient scaler etc."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        grad_scaler: Optional[torch.amp.GradScaler] = None,
        gradient_accumulation_steps: int = 0,
    ) -> None:
        super().__init__(optimizer)
        self._step = 0
        self._grad_scaler = grad_scaler
        self._gradient_accumulation_steps = gradient_accumulation_steps

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero gradients."""
        if (
            self._gradient_accumulation_steps > 1
            and self._step % self._gradient_accumulation_steps == 0
        ):
            self._optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure: Any = None) -> None:
        """Step."""
        self._step += 1
        if (
            self._gradient_accumulation_steps > 1  # ROOT
            and self._step % self._gradient_accumulation_steps == 0
        ):
            if self._grad_scaler is not None:
                self._grad_scaler.step(self._optimizer)
                self._grad_scaler.update()
            else:
                self._optimizer.step(closure=closure)


class DeepFM(nn.Module):
    def __init__(self, num_ids=50, num_fields=4, dim=8):
        super().__init__()
        self.emb = nn.Embedding(num_ids * num_fields, dim)
        nn.init.normal_(self.emb.weight, std=0.1)
        self.offsets = torch.arange(num_fields) * num_ids
        self.mlp = nn.Sequential(nn.Linear(num_fields * dim, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, ids):
        e = self.emb(ids + self.offsets)
        fm = 0.5 * (e.sum(1) ** 2 - (e ** 2).sum(1)).sum(1, keepdim=True)
        return (self.mlp(e.flatten(1)) + fm).squeeze(1)


def _train_and_evaluate(model, optimizer, batches):
    model.train()
    loss_fn = nn.BCEWithLogitsLoss()
    for ids, label in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(ids), label)
        loss.backward()
        optimizer.step()
    return loss.item()


torch.manual_seed(0)
ids = torch.randint(0, 50, (960, 4))
label = (ids[:, 0] < 25).float()
batches = [(ids[i:i + 32], label[i:i + 32]) for i in range(0, 960, 32)]

model = DeepFM()
before = [p.detach().clone() for p in model.parameters()]
optimizer = TZRecOptimizer(torch.optim.SGD(model.parameters(), lr=0.2))
for epoch in range(5):
    last_loss = _train_and_evaluate(model, optimizer, batches)
change = max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))
with torch.no_grad():
    full_loss = nn.BCEWithLogitsLoss()(model(ids), label).item()
print("max param change: %.4f  loss on all data: %.3f" % (change, full_loss))
