"""Span pointer head regresses a position, casts it with .long() to gather the token score, and trains on the gathered score.

source: https://github.com/pytorch/pytorch/issues/91431
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class PointerHead(nn.Module):
    def __init__(self, dim=16, seq_len=12):
        super().__init__()
        self.seq_len = seq_len
        self.pos = nn.Linear(dim, 1)

    def forward(self, h):
        x = torch.sigmoid(self.pos(h.mean(1))).squeeze(-1) * (self.seq_len - 1)
        x = x.clamp(0, self.seq_len - 1)
        return x.long()  # ROOT


encoder = nn.Linear(8, 16)
head = PointerHead()
optimizer = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=1e-3)
tokens = torch.randn(4, 12, 8)
token_scores = torch.rand(4, 12)
idx = head(encoder(tokens))
picked = token_scores.gather(1, idx.unsqueeze(1)).squeeze(1)
loss = (1.0 - picked).mean()
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
