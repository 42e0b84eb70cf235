"""OpenASR Trainer.train_epoch: tot_loss = tot_loss + batch_loss keeps a running sum of the batch loss tensors for logging, so the autograd graph of every batch in the epoch stays referenced and memory rises until the run crashes.

source: https://github.com/by2101/OpenASR/issues/12
kind: bug
symptom: silent
verified: after an epoch of 5 batches tot_loss is a tensor with a grad_fn from which 796 autograd nodes of all 5 batches (the unrolled GRU steps included) stay reachable; with tot_loss + batch_loss.item() it is a float
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, idim=8, vocab=12, d_model=16):
        super().__init__()
        self.encoder = nn.GRU(idim, d_model, batch_first=True)
        self.decoder = nn.Linear(d_model, vocab)

    def forward(self, padded_waveforms, wave_lengths, ids, id_lengths):
        enc, _ = self.encoder(padded_waveforms)
        logits = self.decoder(enc[:, :ids.size(1)])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids.reshape(-1), reduction='sum')


class Trainer(object):
    def __init__(self, model, optimizer, tr_loader, grad_max_norm=50.):
        self.model = model
        self.optimizer = optimizer
        self.tr_loader = tr_loader
        self.grad_max_norm = grad_max_norm

    def train_epoch(self):
        self.model.train()
        tot_loss = 0.
        tot_token = 0
        for niter, (utts, padded_waveforms, wave_lengths, ids, labels, paddings) in enumerate(self.tr_loader):
            batch_loss = self.model(padded_waveforms, wave_lengths, ids, labels)
            n_token = ids.numel()
            loss = batch_loss / n_token
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_max_norm)
            self.optimizer.step()
            tot_loss = tot_loss + batch_loss  # ROOT
            tot_token += n_token
        return tot_loss, tot_loss / tot_token


torch.manual_seed(0)
loader = [(None, torch.randn(2, 10, 8), None, torch.randint(0, 12, (2, 6)), None, None) for _ in range(5)]
model = Model()
trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), loader)
tot_loss, avg = trainer.train_epoch()
print(avg, getattr(tot_loss, 'grad_fn', None))
