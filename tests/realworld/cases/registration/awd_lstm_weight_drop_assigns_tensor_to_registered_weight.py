"""AWD-LSTM WeightDrop on a QRNN layer: _setup copies the layer's weight into a new weight_raw Parameter but leaves the original `weight` registered, and _setweights then assigns the dropped-out tensor with setattr(self.module, 'weight', w), which nn.Module refuses for a registered parameter slot.

source: https://github.com/salesforce/awd-lstm-lm/issues/79
kind: bug
symptom: crash
verified: cannot assign 'torch.FloatTensor' as parameter 'weight' (torch.nn.Parameter or None expected)
"""
import torch
import torch.nn as nn
from torch.nn import Parameter


class WeightDrop(nn.Module):
    def __init__(self, module, weights, dropout=0.0, variational=False):
        super(WeightDrop, self).__init__()
        self.module = module
        self.weights = weights
        self.dropout = dropout
        self.variational = variational
        self._setup()

    def _setup(self):
        for name_w in self.weights:
            print('Applying weight drop of {} to {}'.format(self.dropout, name_w))
            w = getattr(self.module, name_w)
            self.module.register_parameter(name_w + '_raw', Parameter(w.data))  # ROOT

    def _setweights(self):
        for name_w in self.weights:
            raw_w = getattr(self.module, name_w + '_raw')
            w = nn.functional.dropout(raw_w, p=self.dropout, training=self.training)
            setattr(self.module, name_w, w)

    def forward(self, *args):
        self._setweights()
        return self.module.forward(*args)


class QRNNLayer(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, 3 * hidden_size)

    def forward(self, X):
        Z, F_, O = self.linear(X).chunk(3, dim=-1)
        return torch.sigmoid(O) * torch.tanh(Z) * torch.sigmoid(F_)


torch.manual_seed(0)
layer = QRNNLayer(8, 16)
layer.linear = WeightDrop(layer.linear, ['weight'], dropout=0.1)
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
for step in range(2):
    out = layer(torch.randn(5, 4, 8))
    loss = out.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
