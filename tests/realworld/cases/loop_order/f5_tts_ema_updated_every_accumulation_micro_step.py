"""F5-TTS style trainer with gradient accumulation updates the EMA model on every micro-batch.

source: https://github.com/SWivid/F5-TTS/issues/631
kind: bug
symptom: silent
verified: with grad_accumulation_steps=4 the EMA is updated 12 times for 3 optimizer steps, so its effective decay is 0.999**4 per step
"""
import copy
import torch
import torch.nn as nn

torch.manual_seed(0)


class EMA:
    def __init__(self, model, beta=0.999):
        self.ema_model = copy.deepcopy(model)
        self.beta = beta
        self.num_updates = 0

    @torch.no_grad()
    def update(self, model):
        self.num_updates += 1
        for ema_p, p in zip(self.ema_model.parameters(), model.parameters()):
            ema_p.mul_(self.beta).add_(p, alpha=1 - self.beta)


class Trainer:
    def __init__(self, model, grad_accumulation_steps=4):
        self.model = model
        self.ema = EMA(model)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.grad_accumulation_steps = grad_accumulation_steps
        self.optimizer_steps = 0

    def train(self, batches):
        for i, (x, y) in enumerate(batches):
            loss = nn.functional.mse_loss(self.model(x), y) / self.grad_accumulation_steps
            loss.backward()
            if (i + 1) % self.grad_accumulation_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.optimizer_steps += 1
            self.ema.update(self.model)  # ROOT


trainer = Trainer(nn.Linear(8, 8))
trainer.train([(torch.randn(4, 8), torch.randn(4, 8)) for _ in range(12)])
print(trainer.optimizer_steps, trainer.ema.num_updates)
