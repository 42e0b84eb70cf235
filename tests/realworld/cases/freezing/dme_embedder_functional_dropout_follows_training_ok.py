"""DME's meta-embedder as fixed after the issue: `F.dropout(out, p=self.args.emb_dropout, training=self.training)`, so model.eval() turns the dropout off.

source: https://github.com/facebookresearch/DME/issues/3
kind: lookalike
verified: after model.eval() two evaluations of the same batch are identical
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class DMEEmbedder(nn.Module):
    def __init__(self, args, emb_dims):
        super().__init__()
        self.args = args
        self.embedders = nn.ModuleList([nn.Embedding(args.vocab_size, d) for d in emb_dims])
        self.emb_projectors = nn.ModuleList([nn.Linear(d, args.proj_embed_sz) for d in emb_dims])
        self.attn = nn.Linear(args.proj_embed_sz, 1)

    def forward(self, words):
        projected = [proj(emb(words)) for emb, proj in zip(self.embedders, self.emb_projectors)]
        projected = torch.stack(projected, dim=2)
        weights = F.softmax(self.attn(projected), dim=2)
        out = (weights * projected).sum(dim=2)
        out = F.dropout(out, p=self.args.emb_dropout, training=self.training)
        return out


class NLIClassifier(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.embedder = DMEEmbedder(args, emb_dims=(16, 24))
        self.encoder = nn.LSTM(args.proj_embed_sz, 32, batch_first=True, bidirectional=True)
        self.mlp = nn.Sequential(nn.Linear(4 * 64, 64), nn.ReLU(), nn.Linear(64, 3))

    def encode(self, words):
        h, _ = self.encoder(self.embedder(words))
        return h.max(dim=1)[0]

    def forward(self, premise, hypothesis):
        u, v = self.encode(premise), self.encode(hypothesis)
        return self.mlp(torch.cat([u, v, (u - v).abs(), u * v], dim=1))


torch.manual_seed(0)
args = argparse.Namespace(vocab_size=100, proj_embed_sz=32, emb_dropout=0.2)
model = NLIClassifier(args)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
premise, hypothesis = torch.randint(0, 100, (32, 7)), torch.randint(0, 100, (32, 5))
labels = torch.randint(0, 3, (32,))
model.train()
for step in range(5):
    loss = F.cross_entropy(model(premise, hypothesis), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.eval()
with torch.no_grad():
    first = model(premise, hypothesis)
    second = model(premise, hypothesis)
accuracy = (first.argmax(1) == labels).float().mean().item()
assert torch.equal(first, second)
