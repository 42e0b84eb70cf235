"""Spiking network loop that resets every neuron's membrane potential after optimizer.step(), as the spikingjelly maintainer recommends.

source: https://github.com/fangwei123456/spikingjelly/issues/318
kind: lookalike
"""
from contextlib import suppress

import torch
import torch.nn as nn
import torch.nn.functional as F


class LIFNode(nn.Module):
    def __init__(self, tau=2.0, v_threshold=1.0):
        super().__init__()
        self.tau, self.v_threshold = tau, v_threshold
        self.v = 0.0

    def reset(self):
        self.v = 0.0

    def forward(self, x_seq):
        spikes = []
        for x in x_seq:
            self.v = self.v + (x - self.v) / self.tau
            spike = torch.sigmoid(4.0 * (self.v - self.v_threshold))
            self.v = self.v * (1.0 - spike)
            spikes.append(spike)
        return torch.stack(spikes)


class QKFormer(nn.Module):
    def __init__(self, T=4, dim=16):
        super().__init__()
        self.T = T
        self.proj = nn.Conv2d(3, dim, 3, stride=2, padding=1)
        self.proj_lif = LIFNode()
        self.head = nn.Linear(dim, 1)

    def forward(self, img):
        x = self.proj(img).unsqueeze(0).repeat(self.T, 1, 1, 1, 1)
        x = self.proj_lif(x).flatten(3).mean(3)
        return self.head(x.mean(0))


def reset_net(net):
    for m in net.modules():
        if hasattr(m, 'reset'):
            m.reset()


def cal_loss(pre_label, label):
    return {'total': F.binary_cross_entropy_with_logits(pre_label, label)}


torch.manual_seed(0)
model = QKFormer()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
train_loader = [(torch.randn(2, 3, 16, 16), torch.randint(0, 2, (2,))) for _ in range(3)]
for epoch in range(1, 3):
    model.train()
    for iteration, data in enumerate(train_loader):
        img = data[0]
        label = data[1].float()
        with suppress():
            pre_label = model(img).squeeze(1).float()
            loss_dict = cal_loss(pre_label, label)
            loss_total = loss_dict['total']
        optimizer.zero_grad()
        loss_total.backward()
        optimizer.step()
        reset_net(model)
