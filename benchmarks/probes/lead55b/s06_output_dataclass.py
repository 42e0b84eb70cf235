"""A model returns a dataclass whose __post_init__ normalises the loss field to a float tensor."""
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelOutput:
    logits: torch.Tensor
    loss: Optional[torch.Tensor] = None

    def __post_init__(self):
        if self.loss is not None:
            self.loss = torch.as_tensor(float(self.loss))  # ROOT


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(10, 5)

    def forward(self, x, labels=None):
        logits = self.body(x)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return ModelOutput(logits=logits, loss=loss)


torch.manual_seed(0)
model = Classifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(3):
    out = model(torch.randn(4, 10), labels=torch.randint(0, 5, (4,)))
    opt.zero_grad()
    out.loss.backward()
    opt.step()
