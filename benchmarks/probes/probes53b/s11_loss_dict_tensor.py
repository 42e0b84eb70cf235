import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiTaskTrainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=lr)
        self.weights = {"reg": 1.0, "aux": 0.1}

    def losses(self, x, y):
        out = self.model(x)
        return {"reg": F.mse_loss(out[:, :1], y), "aux": out[:, 1:].pow(2).mean()}

    def train_step(self, x, y):
        parts = self.losses(x, y)
        total = torch.tensor(sum(self.weights[k] * v for k, v in parts.items()), requires_grad=True)  # ROOT
        self.opt.zero_grad()
        total.backward()
        self.opt.step()
        return {k: v.item() for k, v in parts.items()}


model = nn.Linear(4, 2)
trainer = MultiTaskTrainer(model)
before = model.weight.clone()
for _ in range(3):
    trainer.train_step(torch.randn(8, 4), torch.randn(8, 1))
print("moved:", not torch.equal(before, model.weight))
