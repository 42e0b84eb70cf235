"""torchtnt-style fit(): the user switches autograd off globally for a prediction pass, and _train_impl does not turn it back on.

source: https://github.com/meta-pytorch/tnt/pull/539
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class MyUnit:
    def __init__(self, module, optimizer):
        self.module = module
        self.optimizer = optimizer
        self.loss_fn = nn.BCEWithLogitsLoss()

    def train_step(self, batch):
        inputs, targets = batch
        outputs = self.module(inputs).squeeze(1)
        loss = self.loss_fn(outputs, targets)
        loss.backward()  # SYMPTOM
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss

    def predict_step(self, batch):
        inputs, _ = batch
        return torch.sigmoid(self.module(inputs))


def _train_impl(unit, dataloader, max_epochs):
    for epoch in range(max_epochs):
        for batch in dataloader:
            unit.train_step(batch)


def fit(unit, dataloader, max_epochs=1):
    _train_impl(unit, dataloader, max_epochs)


def predict(unit, dataloader):
    return [unit.predict_step(batch) for batch in dataloader]


torch.manual_seed(0)
module = nn.Linear(8, 1)
unit = MyUnit(module, torch.optim.SGD(module.parameters(), lr=0.01))
dataloader = [(torch.randn(4, 8), torch.randint(0, 2, (4,)).float()) for _ in range(3)]
torch.set_grad_enabled(False)  # ROOT
print(len(predict(unit, dataloader)))
fit(unit, dataloader, max_epochs=2)
