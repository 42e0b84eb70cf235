"""BiDAF's LSTM.reset_params with the forget-gate bias set under torch.no_grad(), where an in-place fill_ on a chunk of the Parameter is allowed and not recorded.

source: https://github.com/galsang/BiDAF-pytorch/issues/30
kind: lookalike
verified: runs; the forget-gate biases are 1 and the LSTM trains
"""
import torch
import torch.nn as nn


class LSTM(nn.Module):
    def __init__(self, input_size, hidden_size, batch_first=False, num_layers=1, bidirectional=False, dropout=0.2):
        super(LSTM, self).__init__()
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
                           bidirectional=bidirectional, batch_first=batch_first)
        self.reset_params()
        self.dropout = nn.Dropout(p=dropout)

    @torch.no_grad()
    def reset_params(self):
        for i in range(self.rnn.num_layers):
            nn.init.orthogonal_(getattr(self.rnn, f'weight_hh_l{i}'))
            nn.init.kaiming_normal_(getattr(self.rnn, f'weight_ih_l{i}'))
            nn.init.constant_(getattr(self.rnn, f'bias_hh_l{i}'), val=0)
            nn.init.constant_(getattr(self.rnn, f'bias_ih_l{i}'), val=0)
            getattr(self.rnn, f'bias_hh_l{i}').chunk(4)[1].fill_(1)

            if self.rnn.bidirectional:
                nn.init.orthogonal_(getattr(self.rnn, f'weight_hh_l{i}_reverse'))
                nn.init.kaiming_normal_(getattr(self.rnn, f'weight_ih_l{i}_reverse'))
                nn.init.constant_(getattr(self.rnn, f'bias_hh_l{i}_reverse'), val=0)
                nn.init.constant_(getattr(self.rnn, f'bias_ih_l{i}_reverse'), val=0)
                getattr(self.rnn, f'bias_hh_l{i}_reverse').chunk(4)[1].fill_(1)

    def forward(self, x):
        x = self.dropout(x)
        output, _ = self.rnn(x)
        return output


torch.manual_seed(0)
context_LSTM = LSTM(input_size=16, hidden_size=8, bidirectional=True, batch_first=True, dropout=0.2)
out = context_LSTM(torch.randn(2, 5, 16))
out.sum().backward()
assert context_LSTM.rnn.bias_hh_l0[8:16].eq(1).all() and context_LSTM.rnn.weight_ih_l0.grad is not None
