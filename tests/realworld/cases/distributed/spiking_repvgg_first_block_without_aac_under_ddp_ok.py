"""Spiking-RepVGG after its fix: the network passes `use_aac=not first_block` to its blocks, so the first block, which always receives `y=None`, builds no `aac` branch; every parameter DistributedDataParallel registers now gets a gradient each iteration and training proceeds on both ranks. The IF spiking neuron is a ReLU here.

source: https://github.com/alexandercantrell/Spiking-RepVGG/commit/ada72e5a1c326cdc9c525e9c5641fdcb5bc5e9de
kind: lookalike
launch: torchrun --nproc-per-node=2
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class ConvReLUPxP(nn.Sequential):
    def __init__(self, in_channels, out_channels, stride):
        super().__init__(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.ReLU())


class SpikeRepVGGBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride, use_aac=True):
        super().__init__()
        self.identity = stride == 1 and in_channels == out_channels
        self.conv3x3 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn3x3 = nn.BatchNorm2d(out_channels)
        self.conv1x1 = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        if self.identity:
            self.aac = nn.Identity()
        elif use_aac:
            self.aac = ConvReLUPxP(in_channels, out_channels, stride)
        self.sn = nn.ReLU()

    def forward(self, inputs):
        x, y = inputs
        out = self.bn(self.conv1x1(x) + self.bn3x3(self.conv3x3(x)))
        if y is not None:
            y = self.aac(y) + out
        elif self.training:
            y = out
        return self.sn(out), y


class SRepVGG(nn.Module):
    def __init__(self, layers=((16, 2, 1), (32, 2, 2)), num_classes=10):
        super().__init__()
        blocks, in_channels, first_block = [], 3, True
        for channels, num_blocks, stride in layers:
            blocks.append(SpikeRepVGGBlock(in_channels, channels, stride, use_aac=not first_block))
            first_block = False
            blocks += [SpikeRepVGGBlock(channels, channels, 1) for _ in range(num_blocks - 1)]
            in_channels = channels
        self.convs = nn.Sequential(*blocks)
        self.fc = nn.Linear(in_channels, num_classes)
        self.aac = nn.Linear(in_channels, num_classes)

    def forward(self, x):
        x, y = self.convs((x, None))
        out = self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
        if self.training:
            return out, self.aac(F.adaptive_avg_pool2d(y, 1).flatten(1))
        return out


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DDP(SRepVGG())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(rank)
    for step in range(3):
        images = torch.randn(8, 3, 16, 16, generator=gen)
        labels = torch.randint(0, 10, (8,), generator=gen)
        out, aux = model(images)
        loss = F.cross_entropy(out, labels) + F.cross_entropy(aux, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
