import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.crit = nn.CrossEntropyLoss()

    def validate(self, batches):
        self.model.eval()
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        correct = 0
        for x, y in batches:
            correct += (self.model(x).argmax(1) == y).sum().item()
        torch.set_grad_enabled(prev)
        self.model.train()
        return correct

    def train_epoch(self, batches):
        for x, y in batches:
            loss = self.crit(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

    def fit(self, train, val, epochs=2):
        for _ in range(epochs):
            self.train_epoch(train)
            print("val correct", self.validate(val))


data = [(torch.randn(4, 5), torch.randint(0, 3, (4,))) for _ in range(3)]
Trainer(nn.Linear(5, 3)).fit(data, data)
