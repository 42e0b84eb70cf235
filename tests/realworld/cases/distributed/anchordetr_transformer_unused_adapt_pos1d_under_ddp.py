"""AnchorDETR's Transformer builds a positional-adapter layer that its forward never uses; under DistributedDataParallel (find_unused_parameters=False) its parameters never get a gradient, the first iteration's reduction never finishes and the second forward fails (the maintainer's fix deletes the unused layer).

source: https://github.com/megvii-research/AnchorDETR/issues/6
kind: bug
symptom: crash
verified: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


class Transformer(nn.Module):
    def __init__(self, d_model=32, num_query_position=6, num_classes=5):
        super().__init__()
        self.adapt_pos2d = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, d_model))
        self.adapt_pos1d = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, d_model))  # ROOT
        self.position = nn.Embedding(num_query_position, 2)
        self.encoder = nn.Linear(d_model, d_model)
        self.class_embed = nn.Linear(d_model, num_classes)
        self.bbox_embed = nn.Linear(d_model, 4)

    def forward(self, srcs, pos_embed):
        memory = F.relu(self.encoder(srcs + self.adapt_pos2d(pos_embed)))
        query_pos = self.position.weight.unsqueeze(0).repeat(srcs.size(0), 1, 1)
        hs = memory[:, :query_pos.size(1)] + query_pos.mean(-1, keepdim=True)
        return self.class_embed(hs), self.bbox_embed(hs).sigmoid()


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29687'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(Transformer())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for it in range(3):
        srcs, pos_embed = torch.randn(2, 10, 32), torch.randn(2, 10, 32)
        labels, boxes = torch.randint(0, 5, (2, 6)), torch.rand(2, 6, 4)
        pred_logits, pred_boxes = model(srcs, pos_embed)  # SYMPTOM
        loss = F.cross_entropy(pred_logits.flatten(0, 1), labels.flatten()) + F.l1_loss(pred_boxes, boxes)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
