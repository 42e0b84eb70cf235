"""An AWD-LSTM style classifier borrows fastai's WeightDropout to get variational dropout on the LSTM's hidden-to-hidden weights; `_setweights` writes the dropped-out copy of the raw weight back into `self.module._parameters`, so after the first training-mode forward the LSTM's `weight_hh_l0` entry is the output of a dropout op rather than a leaf, and building the optimizer from `model.parameters()` after a shape check fails.

source: https://github.com/pytorch/pytorch/issues/38198
kind: bug
symptom: crash
verified: ValueError: can't optimize a non-leaf Tensor
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class WeightDropout(nn.Module):
    "A module that wraps another layer in which some weights will be replaced by 0 during training."

    def __init__(self, module, weight_p, layer_names=('weight_hh_l0',)):
        super().__init__()
        self.module, self.weight_p, self.layer_names = module, weight_p, layer_names
        for layer in self.layer_names:
            # makes a copy of the weights of the selected layers
            w = getattr(self.module, layer)
            self.register_parameter(f'{layer}_raw', nn.Parameter(w.data))
            self.module._parameters[layer] = F.dropout(w, p=self.weight_p, training=False)
        if isinstance(self.module, nn.RNNBase):
            self.module.flatten_parameters = self._do_nothing

    def _setweights(self):
        "Apply dropout to the raw weights."
        for layer in self.layer_names:
            raw_w = getattr(self, f'{layer}_raw')
            self.module._parameters[layer] = F.dropout(raw_w, p=self.weight_p, training=self.training)  # ROOT

    def forward(self, *args):
        self._setweights()
        return self.module(*args)

    def _do_nothing(self):
        return


class AWDClassifier(nn.Module):
    def __init__(self, vocab, emb=16, hidden=32, n_classes=3):
        super().__init__()
        self.encoder = nn.Embedding(vocab, emb)
        self.rnn = WeightDropout(nn.LSTM(emb, hidden, batch_first=True), weight_p=0.5)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, tokens):
        out, _ = self.rnn(self.encoder(tokens))
        return self.head(out[:, -1])


torch.manual_seed(0)
tokens = torch.randint(0, 50, (64, 12))
labels = torch.randint(0, 3, (64,))
model = AWDClassifier(50)
print("sanity check:", model(tokens[:2]).shape)

optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)  # SYMPTOM
for epoch in range(5):
    for i in range(0, 64, 16):
        loss = F.cross_entropy(model(tokens[i:i + 16]), labels[i:i + 16])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("loss %.4f" % loss.item())
