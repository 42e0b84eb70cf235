"""SpeechBrain's WeightedSSLModel after the fix: the stacked hidden states are detached only when self.freeze is set, so with freeze=False the downstream loss reaches the SSL encoder and fine-tunes it together with the layer weights.

source: https://github.com/speechbrain/speechbrain/issues/2759
kind: lookalike
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinySSLEncoder(nn.Module):
    def __init__(self, hidden=16, num_hidden_layers=3):
        super().__init__()
        self.feature_projection = nn.Linear(1, hidden)
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_hidden_layers))

    def forward(self, wav):
        h = self.feature_projection(wav.unsqueeze(-1))
        hidden_states = [h]
        for layer in self.layers:
            h = torch.tanh(layer(h))
            hidden_states.append(h)
        return SimpleNamespace(hidden_states=tuple(hidden_states))


class WeightedSSLModel(nn.Module):
    def __init__(self, layernorm=False, freeze=False):
        super().__init__()
        self.model = TinySSLEncoder()
        self.layernorm = layernorm
        self.freeze = freeze
        self.num_layers = len(self.model.layers) + 1
        zero_init = torch.cat([torch.zeros(self.num_layers)])
        self.weights = nn.Parameter(zero_init, requires_grad=True)

    def forward(self, wav, wav_lens=None):
        feats = self.model(wav)
        if self.freeze:
            hidden_states = torch.stack(feats.hidden_states, dim=0).detach()
        else:
            hidden_states = torch.stack(feats.hidden_states, dim=0)
        assert self.num_layers == hidden_states.shape[0], "Num layers not equal to num hidden states"
        if self.layernorm:
            hidden_states = F.layer_norm(hidden_states, (hidden_states.size(-1),))
        norm_weights = F.softmax(self.weights, dim=-1).view(-1, 1, 1, 1)
        return (hidden_states * norm_weights).sum(axis=0)


torch.manual_seed(0)
ssl = WeightedSSLModel(freeze=False)
classifier = nn.Linear(16, 4)
optimizer = torch.optim.Adam(list(ssl.parameters()) + list(classifier.parameters()), lr=1e-3)
encoder_start = [p.detach().clone() for p in ssl.model.parameters()]
weights_start = ssl.weights.detach().clone()
wavs, labels = torch.randn(8, 50), torch.randint(0, 4, (8,))
for _ in range(20):
    logits = classifier(ssl(wavs).mean(dim=1))
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
moved = sum((p - q).norm() for p, q in zip(ssl.model.parameters(), encoder_start)).item()
print("encoder moved", moved, "grad is None", ssl.model.feature_projection.weight.grad is None,
      "layer weights moved", (ssl.weights - weights_start).norm().item())
