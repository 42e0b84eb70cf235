"""The Auto-PyTorch trainer with the scheduler stepped in on_epoch_end (the pull request's fix): the epoch-based cosine schedule decays once over the run.

source: https://github.com/automl/Auto-PyTorch/pull/210
kind: lookalike
"""
import torch
import torch.nn as nn


class BaseTrainerComponent:
    def prepare(self, model, optimizer, scheduler, criterion):
        self.model, self.optimizer, self.scheduler, self.criterion = model, optimizer, scheduler, criterion

    def train_epoch(self, train_loader, epoch):
        loss_sum, N = 0.0, 0
        self.model.train()
        for step, (data, targets) in enumerate(train_loader):
            loss = self.train_step(data, targets)
            loss_sum += loss * data.size(0)
            N += data.size(0)
        return loss_sum / N

    def train_step(self, data, targets):
        self.optimizer.zero_grad()
        outputs = self.model(data)
        loss = self.criterion(outputs, targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def on_epoch_end(self, loss):
        if self.scheduler:
            if 'ReduceLROnPlateau' in self.scheduler.__class__.__name__:
                self.scheduler.step(loss)
            else:
                self.scheduler.step()


torch.manual_seed(0)
epochs = 5
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
trainer = BaseTrainerComponent()
trainer.prepare(model, optimizer, scheduler, nn.CrossEntropyLoss())
train_loader = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(8)]
lrs = []
for epoch in range(epochs):
    lrs.append(optimizer.param_groups[0]['lr'])
    loss = trainer.train_epoch(train_loader, epoch)
    trainer.on_epoch_end(loss)
print([round(lr, 4) for lr in lrs], round(loss, 4))
