"""The training loop as the replies in the report advise: `optimizer.step()` updates the weights after every backward, and the learning-rate scheduler is stepped once at the end of each epoch, so the model fits the linear target.

source: https://github.com/pytorch/pytorch/issues/3814
kind: lookalike
"""
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, lr=0.05):
        self.model = model
        self.criterion = nn.MSELoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=10, gamma=0.5)

    def train_batch(self, x, y):
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def end_epoch(self):
        self.scheduler.step()

    def fit(self, batches, epochs):
        for epoch in range(epochs):
            for x, y in batches:
                loss = self.train_batch(x, y)
            self.end_epoch()
        return loss


torch.manual_seed(0)
w_true = torch.randn(5, 1)
xs = torch.randn(64, 5)
batches = [(xs[i:i + 8], xs[i:i + 8] @ w_true) for i in range(0, 64, 8)]
model = nn.Linear(5, 1)
before = model.weight.detach().clone()
trainer = Trainer(model)
first = trainer.criterion(model(xs), xs @ w_true).item()
last = trainer.fit(batches, epochs=3)
print("loss %.4f -> %.4f" % (first, trainer.criterion(model(xs), xs @ w_true).item()),
      "weight change %.5f" % (model.weight - before).abs().max().item(),
      "lr %.4f" % trainer.optimizer.param_groups[0]["lr"])
