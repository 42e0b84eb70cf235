"""word_language_model: the manual SGD update p.add_(p.grad, alpha=-lr) on the parameter itself.

source: https://github.com/pytorch/examples/pull/779
kind: bug
symptom: crash
verified: RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
ntokens, lr = 20, 20.0


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(ntokens, 8)
        self.rnn = nn.LSTM(8, 8)
        self.decoder = nn.Linear(8, ntokens)

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output), hidden


model = RNNModel()
criterion = nn.NLLLoss()
data = torch.randint(0, ntokens, (5, 2))
targets = torch.randint(0, ntokens, (10,))
model.zero_grad()
output, hidden = model(data, None)
loss = criterion(torch.log_softmax(output.view(-1, ntokens), 1), targets)
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
for p in model.parameters():
    p.add_(p.grad, alpha=-lr)  # ROOT
