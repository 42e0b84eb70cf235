"""A metrics tracker detaches the logits in place before the loss is computed."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RunningAccuracy:
    def __init__(self):
        self.correct = 0
        self.total = 0

    def update(self, logits, target):
        logits.detach_()  # ROOT
        self.correct += (logits.argmax(1) == target).sum().item()
        self.total += target.numel()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x):
        return self.body(x)


class Trainer:
    def __init__(self, model, lr=0.1):
        self.model = model
        self.optim = torch.optim.SGD(model.parameters(), lr=lr)
        self.acc = RunningAccuracy()

    def training_step(self, batch):
        x, y = batch
        logits = self.model(x)
        self.acc.update(logits, y)
        loss = F.cross_entropy(logits, y)
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    trainer = Trainer(Classifier())
    for _ in range(3):
        batch = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
        trainer.training_step(batch)
    print("acc", trainer.acc.correct / trainer.acc.total)


if __name__ == "__main__":
    main()
