"""Multi-task tagger keeps one head per task in an nn.ModuleDict with keys suffixed '_head'.

source: https://github.com/pytorch/pytorch/issues/71203
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
TASKS = {'span': 2, 'type': 5, 'polarity': 3}


class MultiTaskTagger(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.heads = nn.ModuleDict({f'{task}_head': nn.Linear(dim, n) for task, n in TASKS.items()})

    def forward(self, tokens):
        h, _ = self.encoder(self.embed(tokens))
        return {task: self.heads[f'{task}_head'](h) for task in TASKS}


model = MultiTaskTagger()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 50, (2, 7))
outputs = model(tokens)
loss = sum(nn.functional.cross_entropy(out.reshape(-1, TASKS[t]), torch.randint(0, TASKS[t], (14,)))
           for t, out in outputs.items())
optimizer.zero_grad()
loss.backward()
optimizer.step()
