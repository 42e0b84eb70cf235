"""lit-llama's train_redpajama.py with the optimizer groups the issue asks for (as nanoGPT does): only the 2-d matrices other than the embedding are decayed; RMSNorm scales and wte get weight_decay=0.0.

source: https://github.com/Lightning-AI/lit-llama/issues/254
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, size, eps=1e-5):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        norm_x = torch.mean(x * x, dim=-1, keepdim=True)
        return self.scale * x * torch.rsqrt(norm_x + self.eps)


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.rms_1 = RMSNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, bias=False, batch_first=True)
        self.rms_2 = RMSNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd, bias=False), nn.SiLU(),
                                 nn.Linear(4 * n_embd, n_embd, bias=False))

    def forward(self, x, mask):
        h = self.rms_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.rms_2(x))


class LLaMA(nn.Module):
    def __init__(self, vocab_size=64, n_embd=32, n_head=4, n_layer=2, block_size=16):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=RMSNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), 1))

    def forward(self, idx):
        t = idx.size(1)
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x, self.mask[:t, :t])
        return self.lm_head(self.transformer.ln_f(x))


torch.manual_seed(0)
learning_rate, weight_decay, beta1, beta2 = 6e-3, 1e-1, 0.9, 0.95
model = LLaMA()
decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "wte" in n]
optim_groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=(beta1, beta2))
for iter_num in range(30):
    input_ids = torch.randint(0, 64, (4, 16))
    targets = torch.randint(0, 64, (4, 16))
    logits = model(input_ids)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
