import torch
import torch.nn as nn
from base import Trainer


class LoggingTrainer(Trainer):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.history = []

    def training_step(self, batch):
        out = self.evaluation_step(batch)  # ROOT
        acc = (out["logits"].argmax(1) == batch[1]).float().mean().item()
        self.history.append((out["loss"].item(), acc))
        return out


model = nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Linear(10, 3))
loader = [(torch.randn(4, 5), torch.randint(0, 3, (4,))) for _ in range(3)]
LoggingTrainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader).fit(2)
