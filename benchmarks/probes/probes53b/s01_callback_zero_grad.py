import torch
import torch.nn as nn
import torch.nn.functional as F


class Callback:
    def on_after_backward(self, trainer):
        pass


class GradNormLogger(Callback):
    def on_after_backward(self, trainer):
        norm = sum(p.grad.norm() for p in trainer.model.parameters() if p.grad is not None)
        trainer.history.append(float(norm))
        trainer.optimizer.zero_grad()  # ROOT


class Trainer:
    def __init__(self, model, optimizer, callbacks=()):
        self.model, self.optimizer, self.callbacks = model, optimizer, list(callbacks)
        self.history = []

    def fit(self, batches):
        for x, y in batches:
            loss = F.mse_loss(self.model(x), y)
            loss.backward()
            for cb in self.callbacks:
                cb.on_after_backward(self)
            self.optimizer.step()


model = nn.Linear(3, 1)
before = model.weight.clone()
Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), [GradNormLogger()]).fit(
    [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
print("moved:", not torch.equal(before, model.weight))
