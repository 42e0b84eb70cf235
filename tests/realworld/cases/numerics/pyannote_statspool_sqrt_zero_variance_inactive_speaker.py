"""pyannote.audio's StatsPool computes a weighted mean and standard deviation per speaker; when a speaker is inactive in a chunk its weights are all zero, the variance is exactly 0 and `torch.sqrt(var)` has an infinite derivative there, which multiplied by the zero weights gives NaN gradients: one optimizer step turns the weights of every layer below the pooling into NaN (the loss itself is finite).

source: https://github.com/pyannote/pyannote-audio/commit/7f9d207f15b84a30e918b698265f5cf20c16f3ce
kind: bug
symptom: silent
verified: step 0's loss is finite, but its backward gives NaN gradients (a speaker with all-zero weights in the chunk): after that one step the TDNN weights are NaN and every later loss is NaN
"""
import warnings
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class StatsPool(nn.Module):
    def forward(self, sequences: torch.Tensor, weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        if weights is None:
            mean = sequences.mean(dim=-1)
            std = sequences.std(dim=-1, correction=1)
        else:
            # Unsqueeze before frames dimension to match with waveforms dimensions
            weight_dims = len(weights.shape)
            weights = weights.unsqueeze(dim=-2)
            if weight_dims == 3:
                sequences = sequences.unsqueeze(dim=1)

            num_frames = sequences.shape[-1]
            num_weights = weights.shape[-1]
            if num_frames != num_weights:
                warnings.warn(f"Mismatch between frames ({num_frames}) and weights ({num_weights}) numbers.")
                weights = F.interpolate(weights, size=num_frames, mode="linear", align_corners=False)

            # add an epsilon value to avoid division by zero when the sum of the weights is 0
            v1 = weights.sum(dim=-1) + 1e-8
            mean = torch.sum(sequences * weights, dim=-1) / v1

            dx2 = torch.square(sequences - mean.unsqueeze(-1))
            v2 = torch.square(weights).sum(dim=-1)

            var = torch.sum(dx2 * weights, dim=-1) / ((v1 - v2 / v1) + 1e-8)
            std = torch.sqrt(var)  # ROOT

        return torch.cat([mean, std], dim=-1)


class XVector(nn.Module):
    def __init__(self, n_feats=20, channels=32, dimension=16):
        super().__init__()
        self.tdnns = nn.Sequential(
            nn.Conv1d(n_feats, channels, 5, dilation=1, padding=2), nn.LeakyReLU(), nn.BatchNorm1d(channels),
            nn.Conv1d(channels, channels, 3, dilation=2, padding=2), nn.LeakyReLU(), nn.BatchNorm1d(channels),
        )
        self.stats_pool = StatsPool()
        self.embedding = nn.Linear(2 * channels, dimension)

    def forward(self, feats, weights=None):
        outputs = self.tdnns(feats)
        return self.embedding(self.stats_pool(outputs, weights=weights))


model = XVector()
head = nn.Linear(16, 5)
optimizer = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-3)

for step in range(4):
    feats = torch.randn(4, 20, 60)
    # per-speaker activations of a 3-speaker segmentation; speaker 2 is silent in this chunk
    weights = torch.rand(4, 3, 60)
    weights[:, 2] = 0.0
    labels = torch.randint(0, 5, (4, 3))
    embeddings = model(feats, weights=weights)  # (batch, speakers, dimension)
    loss = F.cross_entropy(head(embeddings).reshape(-1, 5), labels.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    w = model.tdnns[0].weight
    print(f"step {step}: loss {loss.item():.4f} finite={torch.isfinite(loss).item()} "
          f"tdnn weight NaN={torch.isnan(w).any().item()} embedding NaN={torch.isnan(model.embedding.weight).any().item()}")
