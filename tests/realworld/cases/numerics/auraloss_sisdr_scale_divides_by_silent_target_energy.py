"""auraloss's SISDRLoss computes the projection scale `alpha = <input, target> / ||target||^2` with no epsilon; a batch containing a silent (all-zero) target makes it 0/0 = NaN, the loss and every gradient become NaN, and the separation network trained with it in `train_epoch` ends up with NaN weights after the optimizer step, with no error.

source: https://github.com/csteinmetz1/auraloss/pull/26
kind: bug
symptom: silent
verified: the first batch with a silent target source gives loss nan and NaN gradients, and after that `optimizer.step()` every weight of the model is NaN (all NaN: True); in the look-alike (`+ self.eps` in the denominator) the loss stays finite and no weight is NaN
"""
import torch
import torch.nn as nn


def apply_reduction(losses, reduction="none"):
    if reduction == "mean":
        losses = losses.mean()
    elif reduction == "sum":
        losses = losses.sum()
    return losses


class SISDRLoss(torch.nn.Module):
    """Scale-invariant signal-to-distortion ratio loss module (negative SI-SDR)."""

    def __init__(self, zero_mean=True, eps=1e-8, reduction="mean"):
        super(SISDRLoss, self).__init__()
        self.zero_mean = zero_mean
        self.eps = eps
        self.reduction = reduction

    def forward(self, input, target):
        if self.zero_mean:
            input_mean = torch.mean(input, dim=-1, keepdim=True)
            target_mean = torch.mean(target, dim=-1, keepdim=True)
            input = input - input_mean
            target = target - target_mean

        alpha = (input * target).sum(-1) / ((target ** 2).sum(-1))  # ROOT
        target = target * alpha.unsqueeze(-1)
        res = input - target

        losses = 10 * torch.log10(
            (target ** 2).sum(-1) / ((res ** 2).sum(-1) + self.eps) + self.eps
        )
        losses = apply_reduction(losses, self.reduction)
        return -losses


class Separator(nn.Module):
    def __init__(self, n_src=2, hidden=32):
        super().__init__()
        self.n_src = n_src
        self.encoder = nn.Conv1d(1, hidden, 16, stride=8, padding=4)
        self.mask = nn.Conv1d(hidden, hidden * n_src, 1)
        self.decoder = nn.ConvTranspose1d(hidden, 1, 16, stride=8, padding=4)

    def forward(self, mix):
        w = torch.relu(self.encoder(mix))
        masks = torch.sigmoid(self.mask(w)).chunk(self.n_src, dim=1)
        return torch.cat([self.decoder(w * m) for m in masks], dim=1)


def train_epoch(model, optimizer, loss_fn, batches):
    model.train()
    for mix, sources in batches:
        optimizer.zero_grad()
        est = model(mix)
        loss = loss_fn(est, sources)
        loss.backward()
        optimizer.step()
        print("loss %.3f  any NaN weight: %s" % (loss.item(), any(torch.isnan(p).any().item() for p in model.parameters())))


torch.manual_seed(0)
batches = []
for i in range(4):
    sources = torch.randn(4, 2, 256)
    if i == 2:
        sources[1, 1] = 0.0  # a clip in which the second source is silent
    batches.append((sources.sum(1, keepdim=True), sources))

model = Separator()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_epoch(model, optimizer, SISDRLoss(), batches)
print("all weights NaN:", all(torch.isnan(p).all().item() for p in model.parameters()))
