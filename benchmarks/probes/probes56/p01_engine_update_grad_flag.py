"""An ignite-like engine written by hand: a factory returns the update closure."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class State(dict):
    pass


class Engine:
    def __init__(self, process_fn):
        self.process_fn = process_fn
        self.state = State(epoch=0, iteration=0)

    def run(self, data, max_epochs=1):
        for _ in range(max_epochs):
            self.state["epoch"] += 1
            for batch in data:
                self.state["iteration"] += 1
                self.state["output"] = self.process_fn(self, batch)
        return self.state


def create_trainer(model, optimizer, loss_fn):
    def _update(engine, batch):
        model.train()
        optimizer.zero_grad()
        x, y = batch
        with torch.set_grad_enabled(engine.state.get("training", False)):  # ROOT
            y_pred = model(x)
            loss = loss_fn(y_pred, y)
        loss.backward()
        optimizer.step()
        return loss.item()
    return _update


model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(3)]
trainer = Engine(create_trainer(model, opt, F.cross_entropy))
print(trainer.run(data, max_epochs=2)["output"])
