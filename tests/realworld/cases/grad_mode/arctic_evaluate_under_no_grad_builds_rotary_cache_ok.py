"""Trainer.evaluate is decorated with @torch.no_grad(); the rotary cache it builds is an ordinary tensor that training can save.

source: https://github.com/snowflakedb/ArcticTraining/pull/265
kind: lookalike
"""
import torch
import torch.nn as nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.cos_cached = None
        self.sin_cached = None

    def forward(self, x):
        seq_len = x.shape[1]
        if self.cos_cached is None or self.cos_cached.shape[0] < seq_len:
            inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float() / self.dim))
            freqs = torch.outer(torch.arange(seq_len).float(), inv_freq)
            emb = torch.cat([freqs, freqs], dim=-1)
            self.cos_cached, self.sin_cached = emb.cos(), emb.sin()
        cos, sin = self.cos_cached[:seq_len], self.sin_cached[:seq_len]
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rotary = RotaryEmbedding(dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        return self.lm_head(self.rotary(self.embed(input_ids)))


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(self, batch):
        self.model.train()
        logits = self.model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(self, batch):
        self.model.eval()
        logits = self.model(batch[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1)).item()

    def train(self, batches):
        for i, batch in enumerate(batches):
            if i % 2 == 0:
                print("eval", self.evaluate(batch))
            print("train", self.step(batch))


torch.manual_seed(0)
trainer = Trainer(TinyLM())
trainer.train([torch.randint(0, 50, (4, 9)) for _ in range(3)])
