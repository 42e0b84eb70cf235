"""Truncated BPTT: the loop detaches `hiddens` only when it is a Tensor, so an LSTM's (h, c) tuple keeps its graph.

source: https://github.com/Lightning-AI/pytorch-lightning/pull/8145
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn


class LitLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=3, hidden_size=8, batch_first=True)
        self.head = nn.Linear(8, 1)

    def training_step(self, batch, batch_idx, hiddens):
        x, y = batch
        out, hiddens = self.lstm(x, hiddens)
        loss = nn.functional.mse_loss(self.head(out), y)
        return {"loss": loss, "hiddens": hiddens}


def detach_hiddens(hiddens):
    if isinstance(hiddens, torch.Tensor):
        return hiddens.detach()
    return hiddens  # ROOT


def fit_tbptt(model, optimizer, batch, truncated_bptt_steps):
    x, y = batch
    hiddens = None
    for split_idx, t in enumerate(range(0, x.shape[1], truncated_bptt_steps)):
        split = (x[:, t:t + truncated_bptt_steps], y[:, t:t + truncated_bptt_steps])
        output = model.training_step(split, split_idx, hiddens)
        optimizer.zero_grad()
        output["loss"].backward()  # SYMPTOM
        optimizer.step()
        hiddens = detach_hiddens(output["hiddens"])


torch.manual_seed(0)
model = LitLSTM()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
fit_tbptt(model, optimizer, (torch.randn(4, 12, 3), torch.randn(4, 12, 1)), truncated_bptt_steps=4)
