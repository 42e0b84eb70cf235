import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.classifier = nn.Linear(16, 2)

    def forward(self, x):
        return self.classifier(self.encoder(x))


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    net = Net()
    net.encoder.requires_grad = False  # ROOT
    model = DDP(net)
    opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
    enc0 = net.encoder[0].weight.clone()
    for _ in range(3):
        x, y = torch.randn(8, 8), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("frozen encoder moved:", (net.encoder[0].weight - enc0).abs().max().item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
