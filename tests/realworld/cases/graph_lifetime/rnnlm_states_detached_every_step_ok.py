"""RNN language model carries the LSTM states across batches through a detach(states) helper.

source: https://github.com/yunjey/pytorch-tutorial/issues/90
kind: lookalike
verified: trains for every batch; the embedding, LSTM and linear weights all change
"""
import torch
import torch.nn as nn

embed_size, hidden_size, num_layers = 8, 16, 1
batch_size, seq_length, vocab_size = 4, 5, 30


class RNNLM(nn.Module):
    def __init__(self, vocab_size, embed_size, hidden_size, num_layers):
        super(RNNLM, self).__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, h):
        x = self.embed(x)
        out, h = self.lstm(x, h)
        out = out.reshape(out.size(0) * out.size(1), out.size(2))
        return self.linear(out), h


def detach(states):
    return [state.detach() for state in states]


torch.manual_seed(0)
ids = torch.randint(0, vocab_size, (batch_size, 6 * seq_length + 1))
model = RNNLM(vocab_size, embed_size, hidden_size, num_layers)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.002)
before = [p.detach().clone() for p in model.parameters()]
states = (torch.zeros(num_layers, batch_size, hidden_size), torch.zeros(num_layers, batch_size, hidden_size))
for i in range(0, ids.size(1) - seq_length, seq_length):
    inputs = ids[:, i:i + seq_length]
    targets = ids[:, (i + 1):(i + 1) + seq_length]
    states = detach(states)
    outputs, states = model(inputs, states)
    loss = criterion(outputs, targets.reshape(-1))
    model.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()
print(all(not torch.equal(b, p) for b, p in zip(before, model.parameters())))
