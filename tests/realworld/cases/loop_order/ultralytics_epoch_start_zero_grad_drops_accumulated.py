"""YOLO trainer: optimizer.zero_grad() at the start of each epoch throws away the gradients accumulated at the end of the last one.

source: https://github.com/ultralytics/ultralytics/pull/11217
kind: bug
symptom: silent
verified: with 10 batches per epoch and accumulate=4, the gradients of batches 8 and 9 of epoch 0 are zeroed before any step (18 of 20 reach one)
"""
import torch
import torch.nn as nn


class BaseTrainer:
    def __init__(self, model, accumulate=4, epochs=2):
        self.model, self.accumulate, self.epochs = model, accumulate, epochs
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.stepped_batches = []

    def optimizer_step(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.optimizer.step()
        self.optimizer.zero_grad()

    def _do_train(self, train_loader):
        nb = len(train_loader)
        last_opt_step, pending = -1, []
        for epoch in range(self.epochs):
            self.model.train()
            self.optimizer.zero_grad()  # ROOT
            pending = []
            for i, (imgs, targets) in enumerate(train_loader):
                ni = i + nb * epoch
                loss = nn.functional.mse_loss(self.model(imgs), targets)
                loss.backward()
                pending.append((epoch, i))
                if ni - last_opt_step >= self.accumulate:
                    self.optimizer_step()
                    self.stepped_batches += pending
                    pending, last_opt_step = [], ni


torch.manual_seed(0)
trainer = BaseTrainer(nn.Linear(6, 2))
loader = [(torch.randn(4, 6), torch.randn(4, 2)) for _ in range(10)]
trainer._do_train(loader)
print("batches that reached a step:", len(trainer.stepped_batches), "of", 2 * len(loader))
