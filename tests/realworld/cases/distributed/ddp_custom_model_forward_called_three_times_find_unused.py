"""DDP with find_unused_parameters=True: the wrapped model is called three times (one weight per call) and the three outputs are summed into one loss, so the reducer sees parameters it already marked unused become ready.

source: https://github.com/huggingface/transformers/issues/24970
kind: bug
symptom: crash
verified: has been marked as ready twice
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class CustomModel(torch.nn.Module):
    def __init__(self):
        super(CustomModel, self).__init__()
        self.w1 = torch.nn.Parameter(torch.tensor(1.5), requires_grad=True)
        self.w2 = torch.nn.Parameter(torch.tensor(1.5), requires_grad=True)
        self.w3 = torch.nn.Parameter(torch.tensor(1.5), requires_grad=True)

    def forward(self, x, order):
        if order == 0:
            return self.w1 * x
        elif order == 1:
            return self.w2 * x
        else:
            return self.w3 * x


def main(local_rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29561'
    torch.distributed.init_process_group(backend="gloo", rank=local_rank, world_size=world_size)
    model = CustomModel()
    model = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)  # ROOT
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.tensor(1.0)
    y1 = model(x, 0)
    y2 = model(x, 1)
    y3 = model(x, 2)
    y = y1 + y2 + y3
    optimizer.zero_grad()
    y.backward()  # SYMPTOM
    optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(2,), nprocs=2, join=True)
