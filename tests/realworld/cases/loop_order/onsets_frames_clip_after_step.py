"""Onsets-and-frames train.py clips the gradient norm after backward() and step(), so clipping does nothing.

source: https://github.com/jongwook/onsets-and-frames/issues/24
kind: bug
symptom: silent
verified: trained weights are identical to a run without clip_grad_norm_
"""
import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_


class OnsetsAndFrames(nn.Module):
    def __init__(self):
        super().__init__()
        self.onset_stack = nn.LSTM(8, 8, batch_first=True)
        self.onset_linear = nn.Linear(8, 4)

    def run_on_batch(self, batch):
        audio, onset_label = batch
        out, _ = self.onset_stack(audio)
        onset_pred = torch.sigmoid(self.onset_linear(out))
        return {'loss/onset': nn.functional.binary_cross_entropy(onset_pred, onset_label)}


torch.manual_seed(0)
model = OnsetsAndFrames()
optimizer = torch.optim.Adam(model.parameters(), lr=6e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.98)
clip_gradient_norm = 1e-4
loader = [(torch.randn(2, 5, 8) * 4, torch.randint(0, 2, (2, 5, 4)).float())] * 4
for i, batch in enumerate(loader):
    predictions = model.run_on_batch(batch)
    loss = sum(predictions.values())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if clip_gradient_norm:
        clip_grad_norm_(model.parameters(), clip_gradient_norm)  # ROOT
