"""A language-model trainer keeps the LSTM state between batches on self without detaching it."""
import torch
import torch.nn as nn


class CharLM(nn.Module):
    def __init__(self, vocab=20, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens, state=None):
        h, state = self.rnn(self.emb(tokens), state)
        return self.out(h), state


class LMTrainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.state = None
        self.criterion = nn.CrossEntropyLoss()

    def step(self, inputs, targets):
        logits, state = self.model(inputs, self.state)
        self.state = state  # ROOT
        loss = self.criterion(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = LMTrainer(CharLM())
    stream = torch.randint(0, 20, (4, 101))
    for i in range(0, 100, 25):
        chunk = stream[:, i:i + 26]
        trainer.step(chunk[:, :-1], chunk[:, 1:])
