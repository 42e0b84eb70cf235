"""Selene TrainModel with the scheduler mode matched to the metric: ReduceLROnPlateau(mode='min') stepped with the validation loss keeps the learning rate while the loss keeps decreasing.

source: https://github.com/FunctionLab/selene/issues/115
kind: lookalike
verified: the validation loss decreases at every check and the learning rate stays 0.1 for all 30 steps
"""
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import ReduceLROnPlateau


class TrainModel:
    def __init__(self, model, loss_criterion, learning_rate=0.1, report_stats_every_n_steps=5):
        self.model = model
        self.criterion = loss_criterion
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=learning_rate, momentum=0.9)
        self.scheduler = ReduceLROnPlateau(self.optimizer, 'min', patience=2, factor=0.1)
        self.nth_step_report_stats = report_stats_every_n_steps
        self.val = (torch.randn(64, 10), torch.rand(64, 1).round())

    def train(self, inputs, targets):
        self.model.train()
        loss = self.criterion(self.model(inputs), targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            return self.criterion(self.model(self.val[0]), self.val[1]).item()

    def train_and_validate(self, max_steps=30):
        for step in range(1, max_steps + 1):
            self.train(self.val[0], self.val[1])
            if step % self.nth_step_report_stats == 0:
                validation_loss = self.validate()
                self.scheduler.step(validation_loss)
                print(step, round(validation_loss, 4), self.optimizer.param_groups[0]['lr'])


torch.manual_seed(0)
trainer = TrainModel(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid()), nn.BCELoss())
trainer.train_and_validate()
