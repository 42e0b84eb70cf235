"""Re-id baseline steps the LR scheduler in an EPOCH_STARTED handler, before any optimizer.step().

source: https://github.com/michuanhaohao/reid-strong-baseline/issues/190
kind: bug
symptom: silent
verified: UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`; epoch 0 trains at lr 0.00035 instead of 0.0035
"""
import torch
import torch.nn as nn


class Engine:
    def __init__(self, update_fn):
        self.update_fn = update_fn
        self.handlers = {'EPOCH_STARTED': [], 'EPOCH_COMPLETED': []}

    def on(self, event):
        def register(fn):
            self.handlers[event].append(fn)
            return fn
        return register

    def run(self, loader, max_epochs):
        for epoch in range(max_epochs):
            for fn in self.handlers['EPOCH_STARTED']:
                fn(self)
            for batch in loader:
                self.update_fn(self, batch)


torch.manual_seed(0)
model = nn.Linear(8, 4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.0035)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
lrs = []


def update(engine, batch):
    img, target = batch
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(img), target)
    loss.backward()
    lrs.append(optimizer.param_groups[0]['lr'])
    optimizer.step()


trainer = Engine(update)


@trainer.on('EPOCH_STARTED')
def adjust_learning_rate(engine):
    scheduler.step()  # ROOT


loader = [(torch.randn(4, 8), torch.randint(0, 4, (4,)))] * 2
trainer.run(loader, max_epochs=3)
print(lrs)
