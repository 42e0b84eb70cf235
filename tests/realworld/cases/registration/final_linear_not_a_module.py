"""The untied output layer is a plain class, not an nn.Module: its weight is never registered or trained.

source: https://github.com/EleutherAI/gpt-neox/pull/267
kind: bug
symptom: silent
verified: model.final_linear.weight never changes (not in model.parameters())
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ParallelLinear:  # ROOT
    def __init__(self, hidden_size, vocab_size):
        self.weight = nn.Parameter(torch.randn(vocab_size, hidden_size) * 0.02)

    def __call__(self, hidden_states):
        return F.linear(hidden_states, self.weight)


class GPT(nn.Module):
    def __init__(self, vocab_size=50, hidden_size=16, tie=False):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden_size)
        self.block = nn.Linear(hidden_size, hidden_size)
        self.final_linear = None if tie else ParallelLinear(hidden_size, vocab_size)

    def forward(self, ids):
        h = torch.tanh(self.block(self.embed(ids)))
        if self.final_linear is None:
            return F.linear(h, self.embed.weight)
        return self.final_linear(h)


torch.manual_seed(0)
model = GPT()
before = model.final_linear.weight.detach().clone()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
ids = torch.randint(0, 50, (4, 10))
for _ in range(3):
    opt.zero_grad()
    logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 50), ids[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
print(torch.equal(before, model.final_linear.weight.detach()))
