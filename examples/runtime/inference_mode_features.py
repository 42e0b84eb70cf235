"""Crash: features precomputed under torch.inference_mode() are fed to a trainable head."""
import torch
import torch.nn as nn

encoder, head = nn.Linear(8, 4), nn.Linear(4, 1)
with torch.inference_mode():  # <- cause
    feats = torch.relu(encoder(torch.randn(16, 8)))
loss = head(feats).pow(2).mean()
loss.backward()
