"""ride's Lifecycle.common_step returns detach_to_cpu({"loss": metrics[loss_key], **metrics, "pred": pred, "target": target}): the helper detaches every tensor in the dict, the loss included, so the training_step output that Lightning's automatic optimization backpropagates has no grad_fn and the first training step fails.

source: https://github.com/LukasHedegaard/ride/pull/12
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import collections.abc
from typing import Any, Dict, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def prefix_keys(prefix: str, dictionary: Dict) -> Dict:
    return {f"{prefix}{k}": v for k, v in dictionary.items()}


def detach_to_cpu(x: Union[Tensor, Sequence[Tensor], Dict[Any, Tensor]]):
    if isinstance(x, Tensor):
        return x.detach().cpu()
    if isinstance(x, collections.abc.Sequence):
        return [detach_to_cpu(t) for t in x]
    if isinstance(x, dict):
        return {k: detach_to_cpu(v) for k, v in x.items()}
    return x


class Lifecycle(nn.Module):  # the MetricMixin/LightningModule parts reduced to what training_step uses
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 3)

    def forward(self, x):
        return self.net(x)

    def collect_metrics(self, preds, targets):
        return {"loss": F.cross_entropy(preds, targets)}

    def common_step(self, pred, target, prefix="train/", log=False):
        loss_key = prefix + "loss"
        metrics = prefix_keys(prefix, self.collect_metrics(pred, target))
        return detach_to_cpu(  # ROOT
            {
                "loss": metrics[loss_key],
                **metrics,
                "pred": pred,
                "target": target,
            }
        )

    def training_step(self, batch, batch_idx=None):
        x, target = batch[0], batch[1]
        pred = self.forward(x)
        return self.common_step(pred, target, prefix="train/", log=True)


torch.manual_seed(0)
model = Lifecycle()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for batch_idx in range(3):  # Lightning's automatic optimization: backward on training_step's "loss"
    batch = (torch.randn(16, 8), torch.randint(0, 3, (16,)))
    step_output = model.training_step(batch, batch_idx)
    optimizer.zero_grad()
    step_output["loss"].backward()  # SYMPTOM
    optimizer.step()
    print("step", batch_idx, "loss", round(step_output["train/loss"].item(), 4))
