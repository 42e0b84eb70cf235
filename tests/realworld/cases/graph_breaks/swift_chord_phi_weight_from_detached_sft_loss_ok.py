"""ms-swift's CHORD loss after PR #6952: the phi weight p * (1 - p) is computed from the detached per-token SFT loss, so it only weights the per-token gradients of -log p and the phi-weighted SFT term raises the expert tokens' probability.

source: https://github.com/modelscope/ms-swift/pull/6952
kind: lookalike
"""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


def per_token_loss_func(outputs, labels, enable_dft_loss: bool = False, **kwargs):
    logits = outputs.logits
    logits = logits.float()
    labels = torch.roll(labels, shifts=-1, dims=-1).view(-1)
    logits = logits.view(-1, logits.shape[-1])
    loss = F.cross_entropy(logits, labels, ignore_index=-100, reduction='none')
    if enable_dft_loss:
        with torch.no_grad():
            target_probs = torch.exp(-loss)
        loss *= target_probs
    return loss


def mu_schedule_function(global_step, mu_warmup_steps, mu_decay_steps, mu_peak, mu_valley):
    if global_step < mu_warmup_steps:
        return (global_step / mu_warmup_steps) * mu_peak
    if global_step >= (mu_warmup_steps + mu_decay_steps):
        return mu_valley
    adjusted_step = global_step - mu_warmup_steps
    cosine_decay = 0.5 * (1 + math.cos(math.pi * adjusted_step / mu_decay_steps))
    return (mu_peak - mu_valley) * cosine_decay + mu_valley


def compute_chord_loss(trainer, grpo_loss: torch.Tensor) -> torch.Tensor:
    current_step = trainer.state.global_step
    mu = mu_schedule_function(current_step, trainer.args.chord_mu_warmup_steps, trainer.args.chord_mu_decay_steps,
                              trainer.args.chord_mu_peak, trainer.args.chord_mu_valley)
    sft_inputs = dict(next(trainer.chord_sft_iterator))
    labels = sft_inputs.pop('labels')
    outputs = trainer.model(**sft_inputs)
    chord_sft_loss = per_token_loss_func(outputs, labels)

    if trainer.args.chord_enable_phi_function:
        per_token_probs = torch.exp(-chord_sft_loss.detach())
        phi = per_token_probs * (1 - per_token_probs)
        chord_sft_loss *= phi

    num_items_in_batch = (labels[:, 1:] != -100).sum()
    chord_sft_loss = chord_sft_loss.sum() / num_items_in_batch
    loss = (1 - mu) * grpo_loss + mu * chord_sft_loss
    return loss


class TinyLM(nn.Module):  # stands for the policy model
    def __init__(self, vocab_size=64, hidden=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden)
        self.lm_head = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids):
        return SimpleNamespace(logits=self.lm_head(torch.tanh(self.embed_tokens(input_ids))))


torch.manual_seed(0)
input_ids = torch.randint(0, 64, (4, 12))
labels = input_ids.clone()
labels[:, 0] = -100  # prompt token; torch.roll brings it to the last position
model = TinyLM()
optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
args = SimpleNamespace(chord_enable_phi_function=True, chord_mu_warmup_steps=0, chord_mu_decay_steps=100,
                       chord_mu_peak=0.9, chord_mu_valley=0.05)
trainer = SimpleNamespace(model=model, args=args, state=SimpleNamespace(global_step=0),
                          chord_sft_iterator=iter(lambda: {'input_ids': input_ids, 'labels': labels}, None))


def expert_token_prob():
    with torch.no_grad():
        return torch.exp(-per_token_loss_func(model(input_ids), labels)[labels.roll(-1, -1).view(-1) != -100]).mean().item()


print("mean expert-token probability before", round(expert_token_prob(), 4))
for step in range(30):
    grpo_loss = torch.zeros(())  # every completion in the group got the same reward: zero advantages
    loss = compute_chord_loss(trainer, grpo_loss)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    trainer.state.global_step += 1
print("mean expert-token probability after", round(expert_token_prob(), 4))
