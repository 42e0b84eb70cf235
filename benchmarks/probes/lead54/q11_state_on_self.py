import torch
import torch.nn as nn


class StatefulLM(nn.Module):
    def __init__(self, vocab=20, hid=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, hid)
        self.rnn = nn.LSTM(hid, hid, batch_first=True)
        self.out = nn.Linear(hid, vocab)
        self.state = None

    def forward(self, tokens):
        h, self.state = self.rnn(self.emb(tokens), self.state)  # ROOT
        return self.out(h)


lm = StatefulLM()
opt = torch.optim.Adam(lm.parameters(), lr=1e-3)
crit = nn.CrossEntropyLoss()
stream = torch.randint(0, 20, (2, 41))
for i in range(0, 40, 10):
    inp, tgt = stream[:, i:i + 10], stream[:, i + 1:i + 11]
    logits = lm(inp)
    loss = crit(logits.reshape(-1, 20), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
