"""torchtune's distributed recipe after PR #2172: the gradients are scaled by `world_size / num_tokens`, which undoes the data-parallel average over the ranks, so the optimizer steps with the gradient of the mean token loss over all ranks.

source: https://github.com/pytorch/torchtune/pull/2172
kind: lookalike
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, SEQ, IGNORE = 16, 6, -100


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, 8)
        self.out = nn.Linear(8, VOCAB)

    def forward(self, tokens):
        return self.out(torch.tanh(self.tok(tokens)))


def scale_grads(model, scaler):
    for p in model.parameters():
        if p.grad is not None:
            p.grad *= scaler


def make_batches(rank, n_micro):
    g = torch.Generator().manual_seed(100 + rank)
    batches = []
    for _ in range(n_micro):
        tokens = torch.randint(0, VOCAB, (2, SEQ), generator=g)
        labels = tokens.clone()
        pad = torch.randint(1, SEQ, (1,), generator=g).item() + rank  # ranks see different token counts
        labels[:, min(pad, SEQ - 1):] = IGNORE
        batches.append((tokens, labels))
    return batches


def run(rank, world_size):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29584"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    base = TinyLM()
    reference = TinyLM()
    reference.load_state_dict(base.state_dict())
    model = DDP(base)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    grad_accum = 2

    num_tokens = torch.tensor(0)
    running_loss = 0
    for idx, (tokens, labels) in enumerate(make_batches(rank, grad_accum)):
        current_num_tokens = (labels != IGNORE).sum()
        num_tokens += current_num_tokens
        logits = model(tokens)
        current_loss = loss_fn(logits.reshape(-1, VOCAB), labels.reshape(-1)) * current_num_tokens
        running_loss += current_loss
        current_loss.backward()
        if (idx + 1) % grad_accum == 0:
            dist.all_reduce(num_tokens)
            # multiply by world_size to undo the data-parallel gradient averaging
            scale_grads(model, world_size / num_tokens)
            stepped = torch.cat([p.grad.flatten() for p in model.parameters()])

    if rank == 0:
        # gradient of the mean token loss over every rank's tokens, on one process
        total = 0
        for r in range(world_size):
            for tokens, labels in make_batches(r, grad_accum):
                total = total + loss_fn(reference(tokens).reshape(-1, VOCAB), labels.reshape(-1)) * (labels != IGNORE).sum()
        (total / num_tokens).backward()
        expected = torch.cat([p.grad.flatten() for p in reference.parameters()])
        ratio = (expected.norm() / stepped.norm()).item()
        print(f"reference gradient / stepped gradient: {ratio:.3f} (world_size {world_size})")
    dist.destroy_process_group()


if __name__ == "__main__":
    # fork: the workers reuse the parent's imported torch instead of re-importing it
    mp.start_processes(run, args=(2,), nprocs=2, join=True, start_method="fork")
