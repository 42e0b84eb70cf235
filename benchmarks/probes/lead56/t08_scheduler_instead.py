"""A trainer class steps the learning-rate scheduler where the optimizer step belongs."""
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, lr=0.1):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=10)

    def fit_batch(self, x, y):
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.scheduler.step()  # ROOT
        return loss.item()


if __name__ == "__main__":
    t = Trainer(nn.Linear(3, 1))
    for _ in range(4):
        t.fit_batch(torch.randn(8, 3), torch.randn(8, 1))
