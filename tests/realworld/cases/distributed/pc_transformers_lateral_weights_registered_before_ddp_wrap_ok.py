"""PC-Transformers after the DDP fix: the lateral weights are registered on the model before it is wrapped in `DistributedDataParallel`, so DDP's reducer covers them, their gradients are all-reduced with the others and every rank keeps the same lateral weights.

source: https://github.com/iCog-Labs-Dev/PC-Transformers/pull/135
kind: lookalike
launch: torchrun --nproc-per-node=2
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.set_num_threads(1)


class PCLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.lateral = None

    def register_lateral_weights(self):
        self.lateral = nn.Parameter(torch.eye(self.dim) * 0.1)

    def forward(self, x):
        if self.lateral is None:
            return x
        return x + x @ self.lateral


class PCTransformerBlock(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc1 = nn.Linear(dim, 16)
        self.fc2 = nn.Linear(16, dim)
        self.pc_fc2 = PCLayer(dim)
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.pc_fc2(self.fc2(torch.relu(self.fc1(x))))
        return self.head(h).squeeze(-1)


def register_all_lateral_weights(module):
    for layer in module.modules():
        if isinstance(layer, PCLayer):
            layer.register_lateral_weights()


def max_rank_difference(tensor):
    gathered = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, tensor.detach().contiguous())
    return max((g - gathered[0]).abs().max().item() for g in gathered)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    block = PCTransformerBlock()
    register_all_lateral_weights(block)
    model = DDP(block)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    torch.manual_seed(100 + rank)  # each rank gets its own data shard
    for _ in range(10):
        x = torch.randn(16, 8)
        y = x.sum(dim=1)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    lateral = max_rank_difference(model.module.pc_fc2.lateral)
    fc = max_rank_difference(model.module.fc2.weight)
    if rank == 0:
        print("lateral max rank difference:", round(lateral, 4), "fc max rank difference:", round(fc, 4))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
