"""PiFold builds OneCycleLR with steps_per_epoch taken from the train loader (the fix), so any batch size fits the schedule.

source: https://github.com/A4Bio/PiFold/issues/6
kind: lookalike
"""
import argparse

import torch
import torch.nn as nn
from torch import optim


def get_optim_scheduler(lr, epoch, model, steps_per_epoch):
    optimizer = optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=lr)
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=epoch * steps_per_epoch)
    return optimizer, scheduler


class ProDesign:
    def __init__(self, args, steps_per_epoch):
        self.args = args
        self.model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 20))
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer, self.scheduler = get_optim_scheduler(args.lr, args.epoch, self.model, steps_per_epoch)

    def train_one_epoch(self, train_loader):
        self.model.train()
        for step_idx, (X, S) in enumerate(train_loader):
            self.optimizer.zero_grad()
            log_probs = self.model(X)
            loss = self.criterion(log_probs, S)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1)
            self.optimizer.step()
            self.scheduler.step()
        return loss.item()


class Exp:
    def __init__(self, args, train_loader):
        self.args = args
        self.train_loader = train_loader
        self._build_method()

    def _build_method(self):
        steps_per_epoch = len(self.train_loader)
        self.method = ProDesign(self.args, steps_per_epoch)

    def train(self):
        for epoch in range(self.args.epoch):
            train_loss = self.method.train_one_epoch(self.train_loader)
            print(epoch, train_loss)


torch.manual_seed(0)
args = argparse.Namespace(lr=1e-3, epoch=2, batch_size=2)
dataset = [(torch.randn(12), torch.randint(0, 20, ()).item()) for _ in range(12)]
train_loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size)
exp = Exp(args, train_loader)
exp.train()
