"""DDP detector runs a different branch on each rank (no ground-truth boxes on one), leaving a head unused.

source: https://github.com/open-mmlab/mmdetection/pull/4742
kind: bug
symptom: crash
verified: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class TwoStageDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(8, 8)
        self.rpn_head = nn.Linear(8, 2)
        self.roi_head = nn.Linear(8, 4)

    def forward(self, img, gt_bboxes):
        x = torch.relu(self.backbone(img))
        losses = {'loss_rpn': self.rpn_head(x).pow(2).mean()}
        if gt_bboxes.numel() > 0:
            losses['loss_bbox'] = (self.roi_head(x)[:, :gt_bboxes.size(-1)] - gt_bboxes.mean(0)).pow(2).mean()
        return losses


def train_detector(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29553'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(TwoStageDetector())  # ROOT
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    for i in range(2):
        img = torch.randn(2, 8)
        gt_bboxes = torch.randn(3, 4) if rank == 0 else torch.zeros(0, 4)
        losses = model(img, gt_bboxes)  # SYMPTOM
        loss = sum(losses.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(train_detector, args=(2,), nprocs=2, join=True)
