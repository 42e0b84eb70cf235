"""minGPT DDP trainer clips gradients between scaler.scale(loss).backward() and scaler.step(), without scaler.unscale_().

source: https://github.com/pytorch/examples/issues/1196
kind: bug
symptom: silent
verified: the clip threshold applies to gradients scaled by 65536: one step moves the head weights by 4.7e-10 (max abs) instead of 2.6e-05 with unscale_() before clipping
"""
import torch
import torch.nn as nn
from dataclasses import dataclass


@dataclass
class TrainerConfig:
    grad_norm_clip: float = 1.0
    use_amp: bool = True
    learning_rate: float = 3e-4


class Trainer:
    def __init__(self, config, model, optimizer):
        self.config, self.model, self.optimizer = config, model, optimizer
        self.scaler = torch.amp.GradScaler("cpu", enabled=config.use_amp)

    def _run_batch(self, source, targets):
        logits = self.model(source)
        loss = nn.functional.cross_entropy(logits, targets)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)  # ROOT
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()


torch.manual_seed(0)
config = TrainerConfig()
model = nn.Sequential(nn.Embedding(64, 32), nn.Flatten(), nn.Linear(32 * 8, 64))
optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate)
trainer = Trainer(config, model, optimizer)
before = model[2].weight.detach().clone()
trainer._run_batch(torch.randint(0, 64, (16, 8)), torch.randint(0, 64, (16,)))
print((model[2].weight - before).abs().max().item())
