"""prime-rl's RL trainer normalises each rank's loss by the number of unmasked (generated) tokens it holds (`loss_scale = sum(micro_batch["loss_mask"].sum() ...)`). When the orchestrator pads a step so every trainer rank gets the same number of micro-batches, a rank can receive only padding micro-batches whose loss mask is all zero: its loss scale is 0, the masked loss sum is divided by it (0/0), and the backward of that division fills every gradient with NaN; the optimizer step writes NaN into all weights and every later step's loss is NaN, without any error.

source: https://github.com/PrimeIntellect-ai/prime-rl/pull/808
kind: bug
symptom: silent
verified: losses per step [-0.511, -0.6628, nan, nan, nan, nan] (step 2 is an all-padding step for this rank) and the weights contain NaN after training: True; in the look-alike the padding step's loss is 0.0, the other steps' losses stay finite and the weights contain no NaN (False)
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB, DIM, SEQ = 32, 16, 12


class TinyPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mix = nn.GRU(DIM, DIM, batch_first=True)
        self.lm_head = nn.Linear(DIM, VOCAB)

    def forward(self, input_ids):
        hidden, _ = self.mix(self.embed(input_ids))
        return self.lm_head(hidden)


def compute_loss(logits, micro_batch, loss_scale):
    logprobs = torch.log_softmax(logits[:, :-1], dim=-1)
    token_logprobs = logprobs.gather(-1, micro_batch["input_ids"][:, 1:, None]).squeeze(-1)
    ratio = torch.exp(token_logprobs - micro_batch["inference_logprobs"][:, 1:])
    per_token = -ratio * micro_batch["advantages"][:, None]
    mask = micro_batch["loss_mask"][:, 1:]
    return (per_token * mask).sum() / loss_scale  # ROOT


def make_micro_batch(padding=False):
    input_ids = torch.randint(0, VOCAB, (2, SEQ))
    loss_mask = torch.zeros(2, SEQ) if padding else (torch.arange(SEQ) >= 4).float().expand(2, SEQ)
    return {
        "input_ids": input_ids,
        "loss_mask": loss_mask,
        "advantages": torch.zeros(2) if padding else torch.randn(2),
        "inference_logprobs": torch.full((2, SEQ), -3.4),
    }


def train_step(model, optimizer, micro_batches):
    loss_scale = torch.tensor(sum(mb["loss_mask"][:, 1:].sum().item() for mb in micro_batches))
    total = 0.0
    for micro_batch in micro_batches:
        loss = compute_loss(model(micro_batch["input_ids"]), micro_batch, loss_scale)
        loss.backward()
        total += loss.item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return total


model = TinyPolicy()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
# this rank's share of six steps; on step 2 the orchestrator padded it with padding micro-batches only
steps = [[make_micro_batch(padding=(step == 2)) for _ in range(2)] for step in range(6)]
losses = [round(train_step(model, optimizer, micro_batches), 4) for micro_batches in steps]
has_nan = any(torch.isnan(p).any().item() for p in model.parameters())
print("losses per step:", losses)
print("weights contain NaN:", has_nan)
