"""A stateful LSTM language model that remembers its state between calls."""
import torch
import torch.nn as nn


class StatefulLM(nn.Module):
    def __init__(self, vocab=20, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, d, batch_first=True)
        self.out = nn.Linear(d, vocab)
        self.state = None

    def reset_state(self):
        self.state = None

    def forward(self, tokens):
        h, self.state = self.rnn(self.emb(tokens), self.state)  # ROOT
        return self.out(h)


lm = StatefulLM()
opt = torch.optim.Adam(lm.parameters(), lr=1e-3)
stream = torch.randint(0, 20, (2, 41))
for epoch in range(2):
    lm.reset_state()
    for i in range(0, 40, 10):
        x, y = stream[:, i:i + 10], stream[:, i + 1:i + 11]
        logits = lm(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 20), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
