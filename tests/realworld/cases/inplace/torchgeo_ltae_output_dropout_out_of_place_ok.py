"""TorchGeo's LTAE after PR 3737: the output dropout is nn.Dropout(dropout) without inplace=True, so it writes a new tensor and the ReLU output saved for backward is left intact; training runs.

source: https://github.com/torchgeo/torchgeo/issues/3735
kind: lookalike
"""
import math
from collections.abc import Sequence

import torch
import torch.nn as nn
from torch import Tensor


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, T: int = 1000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(T).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(T) / d_model))
        pe = torch.zeros(1, T, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)

    def forward(self, x: Tensor) -> Tensor:
        pe = self.pe[:, : x.size(1)]
        return self.dropout(x + pe)


class LTAE(nn.Module):
    def __init__(self, in_channels: int = 128, n_head: int = 16, n_neurons: Sequence[int] = (256, 128),
                 dropout: float = 0.2, d_model: int | None = 256, T: int = 1000, len_max_seq: int = 24) -> None:
        super().__init__()
        self.in_channels, self.n_neurons = in_channels, n_neurons
        self.d_model = d_model if d_model is not None else in_channels
        self.inconv = None
        if d_model is not None:
            self.inconv = nn.Sequential(nn.Conv1d(in_channels, d_model, 1), nn.LayerNorm([d_model, len_max_seq]))
        self.pos_encoder = PositionalEncoding(self.d_model, dropout, T)
        self.attention = nn.MultiheadAttention(embed_dim=self.d_model, num_heads=n_head, dropout=dropout,
                                               batch_first=True)
        self.inlayernorm = nn.LayerNorm(self.in_channels)
        self.outlayernorm = nn.LayerNorm(n_neurons[-1])
        activation = nn.ReLU(inplace=True)
        layers = []
        for i in range(len(self.n_neurons) - 1):
            layers.extend([nn.Linear(self.n_neurons[i], self.n_neurons[i + 1]),
                           nn.BatchNorm1d(self.n_neurons[i + 1]), activation])
        self.mlp = nn.Sequential(*layers)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = self.inlayernorm(x)
        if self.inconv is not None:
            x = self.inconv(x.permute(0, 2, 1)).permute(0, 2, 1)
        x = self.pos_encoder(x)
        attention_output, _ = self.attention(x, x, x)
        mlp_input = attention_output.mean(dim=1)
        return self.outlayernorm(self.dropout(self.mlp(mlp_input)))


torch.manual_seed(0)
model = LTAE(in_channels=16, d_model=16, n_head=4, n_neurons=(16, 32), len_max_seq=5)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, target = torch.randn(8, 5, 16), torch.randn(8, 32)
for step in range(3):
    loss = (model(x) - target).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
