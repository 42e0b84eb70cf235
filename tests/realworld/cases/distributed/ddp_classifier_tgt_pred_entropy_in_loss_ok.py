"""Two DDP-wrapped models for domain adaptation whose loss uses both outputs of the classifier (cross-entropy on src_pred plus the entropy of tgt_pred), so every parameter gets a gradient each iteration.

source: https://github.com/pytorch/pytorch/issues/22436
kind: lookalike
verified: three DDP iterations run on two gloo ranks
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


class FeatureExtractor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class Classifier(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.src_fc = nn.Linear(32, num_classes)
        self.tgt_fc = nn.Linear(32, num_classes)

    def forward(self, src_feat, tgt_feat):
        return self.src_fc(src_feat), self.tgt_fc(tgt_feat)


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29662'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    extractor = DistributedDataParallel(FeatureExtractor())
    classifier = DistributedDataParallel(Classifier())
    params = list(extractor.parameters()) + list(classifier.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01)
    for it in range(3):
        src, src_label, tgt = torch.randn(8, 16), torch.randint(0, 4, (8,)), torch.randn(8, 16)
        src_pred, tgt_pred = classifier(extractor(src), extractor(tgt))
        tgt_prob = F.softmax(tgt_pred, dim=1)
        entropy = -(tgt_prob * F.log_softmax(tgt_pred, dim=1)).sum(1).mean()
        loss = F.cross_entropy(src_pred, src_label) + 0.1 * entropy
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
