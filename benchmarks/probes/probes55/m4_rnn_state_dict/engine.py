import torch
import torch.nn as nn


class CharModel(nn.Module):
    def __init__(self, vocab=30, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, ids, h=None):
        y, h = self.rnn(self.emb(ids), h)
        return self.out(y), h


def train_step(model, optimizer, batch, state):
    logits, hidden = model(batch["x"], state.get("hidden"))
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), batch["y"].flatten())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return {"hidden": hidden, "loss": loss.item()}  # ROOT
