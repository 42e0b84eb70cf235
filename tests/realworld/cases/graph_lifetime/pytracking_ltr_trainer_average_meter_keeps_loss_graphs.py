"""pytracking's LTRTrainer._update_stats feeds the actor's loss tensors into AverageMeter, whose running sum (self.sum += val * n) then chains every iteration's loss graph into one growing autograd graph that the trainer keeps alive for the whole epoch.

source: https://github.com/visionml/pytracking/pull/313
kind: bug
symptom: silent
verified: after 40 iterations the 'Loss/total' meter's sum still has a grad_fn and holds 324 autograd nodes (about 8 per iteration, growing with the epoch) although every loss was already backpropagated; converting tensors with .item() before update (the pull request) leaves plain floats (0 nodes) and the same average 0.1241
"""
from collections import OrderedDict

import torch
import torch.nn as nn


class AverageMeter:
    """Computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class BBRegActor:
    def __init__(self, net, objective):
        self.net, self.objective = net, objective

    def __call__(self, data):
        iou_pred = self.net(data['train_images'])
        loss = self.objective(iou_pred, data['proposal_iou'])
        stats = {'Loss/total': loss, 'Loss/iou': loss}
        return loss, stats


class LTRTrainer:
    def __init__(self, actor, optimizer):
        self.actor, self.optimizer = actor, optimizer
        self.stats = OrderedDict()

    def cycle_dataset(self, loader):
        for i, data in enumerate(loader, 1):
            loss, stats = self.actor(data)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self._update_stats(stats, data['train_images'].shape[0])

    def _update_stats(self, new_stats, batch_size):
        for name, val in new_stats.items():
            if name not in self.stats:
                self.stats[name] = AverageMeter()
            self.stats[name].update(val, batch_size)  # ROOT



torch.manual_seed(0)
net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 4))
trainer = LTRTrainer(BBRegActor(net, nn.MSELoss()), torch.optim.Adam(net.parameters(), lr=1e-3))
loader = [{'train_images': torch.rand(4, 3, 8, 8), 'proposal_iou': torch.rand(4, 4)} for _ in range(40)]
trainer.cycle_dataset(loader)
print(trainer.stats['Loss/total'].avg)
