"""The trainer's train_step steps the optimizer but never zeroes its gradients.

source: https://github.com/meta-pytorch/torchforge/pull/71
kind: bug
symptom: silent
verified: after step k, model.weight.grad is the sum of the gradients of all k steps
"""
import torch
import torch.nn as nn


class RLTrainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def compute_loss(self, batch):
        logits = self.model(batch["inputs"])
        return nn.functional.cross_entropy(logits, batch["targets"])

    def train_step(self, batch):
        loss = self.compute_loss(batch)
        loss.backward()  # ROOT
        self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
trainer = RLTrainer(nn.Linear(6, 3))
for step in range(4):
    batch = {"inputs": torch.randn(8, 6), "targets": torch.randint(0, 3, (8,))}
    print(step, trainer.train_step(batch), trainer.model.weight.grad.norm().item())
