"""build-nanogpt's train_gpt2.py after PR #30: `model.require_backward_grad_sync` is set before the forward of each micro-step, so DDP prepares the all-reduce for the last micro-step's backward and the replicas stay identical.

source: https://github.com/karpathy/build-nanogpt/pull/30
kind: lookalike
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class GPT(nn.Module):  # stands for the 124M GPT-2: an embedding, one MLP block and a tied head
    def __init__(self, vocab_size=64, n_embd=32):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.mlp = nn.Sequential(nn.LayerNorm(n_embd), nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        x = self.wte(idx)
        x = x + self.mlp(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


class DataLoaderLite:  # each rank reads its own shard of tokens
    def __init__(self, B, T, process_rank, num_processes):
        self.B, self.T = B, T
        g = torch.Generator().manual_seed(1234 + process_rank)
        self.tokens = torch.randint(0, 64, (B * T * 16 + 1,), generator=g)
        self.current_position = 0

    def next_batch(self):
        B, T = self.B, self.T
        buf = self.tokens[self.current_position:self.current_position + B * T + 1]
        x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
        self.current_position += B * T
        return x, y


def run(ddp_rank, ddp_world_size):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29572"
    dist.init_process_group("gloo", rank=ddp_rank, world_size=ddp_world_size)
    ddp = True
    torch.manual_seed(1337)
    B, T, grad_accum_steps, max_steps = 4, 8, 2, 3
    train_loader = DataLoaderLite(B=B, T=T, process_rank=ddp_rank, num_processes=ddp_world_size)
    model = GPT()
    if ddp:
        model = DDP(model)
    raw_model = model.module if ddp else model
    optimizer = torch.optim.AdamW(raw_model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8)

    for step in range(max_steps):
        model.train()
        optimizer.zero_grad()
        loss_accum = 0.0
        for micro_step in range(grad_accum_steps):
            x, y = train_loader.next_batch()
            # this field is also used by the forward pass
            if ddp:
                model.require_backward_grad_sync = (micro_step == grad_accum_steps - 1)
            logits, loss = model(x, y)
            loss = loss / grad_accum_steps
            loss_accum += loss.detach()
            loss.backward()
        if ddp:
            dist.all_reduce(loss_accum, op=dist.ReduceOp.AVG)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    flat = torch.cat([p.detach().reshape(-1) for p in raw_model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(ddp_world_size)]
    dist.all_gather(gathered, flat)
    if ddp_rank == 0:
        print("max |rank0 - rank1| over parameters:", (gathered[0] - gathered[1]).abs().max().item())
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, args=(2,), nprocs=2, join=True)
