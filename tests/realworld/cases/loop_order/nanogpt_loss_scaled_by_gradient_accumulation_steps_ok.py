"""nanoGPT train.py divides each micro-step's loss by gradient_accumulation_steps, a constant, before backward; the accumulated gradient is then the mean over the micro-batches, which is what a step on the full batch would see (the issue's proposal, dividing by micro_step + 1, would weight the micro-batches unequally).

source: https://github.com/karpathy/nanoGPT/issues/605
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT(nn.Module):
    def __init__(self, vocab_size=32, n_embd=16, block_size=8):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.TransformerEncoderLayer(n_embd, 2, 4 * n_embd, 0.0, batch_first=True, norm_first=True)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        t = idx.size(1)
        mask = torch.triu(torch.full((t, t), float('-inf')), diagonal=1)
        x = self.h(self.wte(idx) + self.wpe(torch.arange(t)), src_mask=mask)
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def get_batch():
    data = torch.randint(0, 32, (4, 9))
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()


torch.manual_seed(0)
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
gradient_accumulation_steps = 4
grad_clip = 1.0
X, Y = get_batch()
for iter_num in range(3):
    for micro_step in range(gradient_accumulation_steps):
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps  # scale the loss to account for gradient accumulation
        X, Y = get_batch()
        loss.backward()
    if grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(iter_num, loss.item() * gradient_accumulation_steps)
