import torch
import torch.nn as nn


class CharRNN(nn.Module):
    def __init__(self, vocab=20, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.proj = nn.Linear(hidden, vocab)

    def init_hidden(self, batch):
        return torch.zeros(1, batch, self.rnn.hidden_size)

    def forward(self, tokens, h):
        out, h = self.rnn(self.embed(tokens), h)
        return self.proj(out), h
