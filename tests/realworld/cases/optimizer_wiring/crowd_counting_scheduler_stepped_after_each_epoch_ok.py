"""Crowd-counting trainer steps the LR scheduler after each epoch's training, so epoch 0 runs at the initial rate.

source: https://github.com/gjy3035/C-3-Framework/issues/96
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import StepLR


class cfg:
    LR = 1e-5
    LR_DECAY = 0.995
    LR_DECAY_START = -1
    NUM_EPOCH_LR_DECAY = 1
    MAX_EPOCH = 3


class Trainer:
    def __init__(self):
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=cfg.LR, weight_decay=1e-4)
        self.scheduler = StepLR(self.optimizer, step_size=cfg.NUM_EPOCH_LR_DECAY, gamma=cfg.LR_DECAY)
        self.train_loader = [(torch.rand(2, 3, 16, 16), torch.rand(2, 1, 16, 16)) for _ in range(3)]

    def forward(self):
        for epoch in range(cfg.MAX_EPOCH):
            self.train(epoch)
            if epoch > cfg.LR_DECAY_START:
                self.scheduler.step()

    def train(self, epoch):
        self.net.train()
        for img, gt_map in self.train_loader:
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.net(img), gt_map)
            loss.backward()
            self.optimizer.step()
        print(epoch, self.optimizer.param_groups[0]['lr'])


torch.manual_seed(0)
Trainer().forward()
