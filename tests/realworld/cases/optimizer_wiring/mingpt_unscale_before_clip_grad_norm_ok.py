"""minGPT DDP trainer calls scaler.unscale_() before clipping, then scaler.step() and scaler.update().

source: https://github.com/pytorch/examples/issues/1196
kind: lookalike
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
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
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
