"""LSTM language model carries (h0, c0) from batch to batch without detaching; retain_graph=True then meets weights that optimizer.step() changed.

source: https://blog.youkuaiyun.com/windhawk_fly/article/details/143405685
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class LSTMModel(nn.Module):
    def __init__(self, vocab_size=20, embedding_dim=8, hidden_dim=16, num_layers=1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_dim, vocab_size)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(self.embedding(x), (h0, c0))
        return self.fc(out), (h, c)


torch.manual_seed(0)
EPOCH, batch_size, num_layers, hidden_dim, vocab_size = 1, 4, 1, 16, 20
lstm = LSTMModel()
optimizer = torch.optim.Adam(lstm.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
data_loader = [(torch.randint(0, vocab_size, (batch_size, 6)), torch.randint(0, vocab_size, (batch_size, 6)))
               for _ in range(3)]
for epoch in range(EPOCH):
    h0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    c0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    for batch in data_loader:
        optimizer.zero_grad()
        output, (h0, c0) = lstm(batch[0], h0, c0)  # ROOT
        loss = loss_fn(output.reshape(-1, vocab_size), batch[1].reshape(-1))
        loss.backward(retain_graph=True)  # SYMPTOM
        optimizer.step()
