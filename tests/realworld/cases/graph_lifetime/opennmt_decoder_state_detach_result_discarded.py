"""Truncated BPTT: DecoderState.detach() calls h.detach() on each state tensor and drops the result, so the state keeps the previous batch's graph.

source: https://github.com/OpenNMT/OpenNMT-py/issues/403
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn


class RNNDecoderState:
    def __init__(self, hidden, input_feed):
        self.hidden = hidden
        self.input_feed = input_feed

    @property
    def _all(self):
        return self.hidden + (self.input_feed,)

    def detach(self):
        for h in self._all:
            h.detach()  # ROOT


class Decoder(nn.Module):
    def __init__(self, vocab=30, hidden=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(2 * hidden, hidden)
        self.generator = nn.Linear(hidden, vocab)

    def forward(self, tgt, state):
        outputs = []
        hidden, input_feed = state.hidden, state.input_feed
        for emb_t in self.embeddings(tgt).split(1):
            out, hidden = self.rnn(torch.cat([emb_t, input_feed], -1), hidden)
            input_feed = out
            outputs.append(out)
        state.hidden, state.input_feed = hidden, input_feed
        return self.generator(torch.cat(outputs))


torch.manual_seed(0)
decoder = Decoder()
optim = torch.optim.SGD(decoder.parameters(), lr=0.1)
state = RNNDecoderState((torch.zeros(1, 4, 16), torch.zeros(1, 4, 16)), torch.zeros(1, 4, 16))
tgt = torch.randint(0, 30, (12, 4))
trunc_size = 4
for j in range(0, tgt.size(0) - 1, trunc_size):
    tgt_chunk = tgt[j: j + trunc_size]
    logits = decoder(tgt_chunk[:-1], state)
    loss = nn.functional.cross_entropy(logits.view(-1, 30), tgt_chunk[1:].reshape(-1))
    decoder.zero_grad()
    loss.backward()  # SYMPTOM
    optim.step()
    state.detach()
