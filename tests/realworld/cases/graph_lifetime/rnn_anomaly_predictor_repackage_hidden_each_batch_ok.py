"""RNN time-series anomaly predictor: the LSTM state is carried from batch to batch but passed through repackage_hidden (detach) first.

source: https://github.com/chickenbestlover/RNN-Time-series-Anomaly-Detection/issues/42
kind: lookalike
verified: 6 batches train without error; repackage_hidden returns the carried state without a grad_fn (None)
"""
import torch
import torch.nn as nn


class RNNPredictor(nn.Module):
    def __init__(self, enc_inp_size=3, rnn_inp_size=16, rnn_hid_size=32, dec_out_size=3, nlayers=2):
        super().__init__()
        self.encoder = nn.Linear(enc_inp_size, rnn_inp_size)
        self.rnn = nn.LSTM(rnn_inp_size, rnn_hid_size, nlayers)
        self.decoder = nn.Linear(rnn_hid_size, dec_out_size)
        self.nlayers, self.rnn_hid_size = nlayers, rnn_hid_size

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(output), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.rnn_hid_size),
                weight.new_zeros(self.nlayers, bsz, self.rnn_hid_size))

    def repackage_hidden(self, h):
        if type(h) == tuple:
            return tuple(self.repackage_hidden(v) for v in h)
        return h.detach()


torch.manual_seed(0)
model = RNNPredictor()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
criterion = nn.MSELoss()
series = torch.randn(6 * 10 + 1, 4, 3)
hidden = model.init_hidden(4)
model.train()
for batch, i in enumerate(range(0, 60, 10)):
    inputSeq, targetSeq = series[i:i + 10], series[i + 1:i + 11]
    hidden = model.repackage_hidden(hidden)
    optimizer.zero_grad()
    outSeq, hidden = model(inputSeq, hidden)
    loss = criterion(outSeq, targetSeq)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
print(model.repackage_hidden(hidden)[0].grad_fn)
