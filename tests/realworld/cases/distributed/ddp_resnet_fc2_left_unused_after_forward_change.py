"""ResNet under DDP: after a forward change the old fc2 layer is still built in __init__ but no longer used.

source: https://github.com/pytorch/vision/issues/2505
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


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc1 = nn.Linear(8, num_classes)
        self.fc2 = nn.Linear(num_classes, num_classes)  # ROOT

    def forward(self, x):
        x = self.features(x)
        return self.fc1(x)


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29643'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for i in range(3):
        images, target = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
        output = model(images)  # SYMPTOM
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
