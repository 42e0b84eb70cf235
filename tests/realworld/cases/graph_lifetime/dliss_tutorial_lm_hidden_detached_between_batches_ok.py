"""DLISS tutorial language model: the LSTM state is carried from batch to batch (one long sequence) but detached at the start of every step, i.e. truncated backpropagation through time; each backward only runs through the current batch.

source: https://github.com/dpressel/dliss-tutorial/issues/1
kind: lookalike
verified: every step's backward succeeds and the carried state has no grad_fn at the start of the next step
"""
import torch
import torch.nn as nn


class LSTMLanguageModel(nn.Module):
    def __init__(self, vsz, dsz=16, hsz=16):
        super().__init__()
        self.embed = nn.Embedding(vsz, dsz)
        self.rnn = nn.LSTM(dsz, hsz, batch_first=True)
        self.output = nn.Linear(hsz, vsz)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.embed(x), hidden)
        return self.output(out), hidden


torch.manual_seed(0)
vsz = 30
model = LSTMLanguageModel(vsz)
optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
stream = torch.randint(0, vsz, (2, 41))
h = None
for i in range(0, 40, 10):
    x, y = stream[:, i:i + 10], stream[:, i + 1:i + 11]
    if h is not None:
        h = tuple(each.detach() for each in h)
        assert all(each.grad_fn is None for each in h)
    optimizer.zero_grad()
    logits, h = model(x, h)
    loss = nn.functional.cross_entropy(logits.reshape(-1, vsz), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
print("ok")
