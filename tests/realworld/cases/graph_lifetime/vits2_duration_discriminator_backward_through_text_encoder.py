"""vits2_pytorch's train.py feeds the duration discriminator the text encoder's `hidden_x` and the predicted `logw` without detaching them in the discriminator step; the discriminator's backward therefore runs through the generator's text encoder and frees its saved tensors, and the generator step's backward, which goes through the same `hidden_x` again, fails.

source: https://github.com/p0p4k/vits2_pytorch/commit/e1110080088dc39fd3f35820d0472e67869a851e
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.amp import GradScaler

torch.manual_seed(0)


class TextEncoder(nn.Module):
    def __init__(self, n_vocab, hidden):
        super().__init__()
        self.emb = nn.Embedding(n_vocab, hidden)
        self.conv = nn.Conv1d(hidden, hidden, 3, padding=1)

    def forward(self, x, x_mask):
        h = self.emb(x).transpose(1, 2)
        return torch.tanh(self.conv(h)) * x_mask


class SynthesizerTrn(nn.Module):
    def __init__(self, n_vocab=20, hidden=16, spec_channels=8):
        super().__init__()
        self.enc_p = TextEncoder(n_vocab, hidden)
        self.dp = nn.Conv1d(hidden, 1, 1)
        self.proj = nn.Conv1d(hidden, spec_channels, 1)
        self.dec = nn.ConvTranspose1d(spec_channels, 1, 4, stride=4)

    def forward(self, x, x_lengths, spec):
        x_mask = (torch.arange(x.size(1))[None] < x_lengths[:, None]).float().unsqueeze(1)
        hidden_x = self.enc_p(x, x_mask)
        logw = torch.log1p(spec.abs().mean(1, keepdim=True)) * x_mask  # durations from the alignment
        logw_ = self.dp(hidden_x) * x_mask  # predicted durations
        l_length = torch.sum((logw - logw_) ** 2, [1, 2]) / x_mask.sum()
        y_hat = self.dec(self.proj(hidden_x))
        return y_hat, l_length, x_mask, (hidden_x, logw, logw_)


class DurationDiscriminator(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.pre = nn.Conv1d(hidden, 8, 1)
        self.dur_proj = nn.Conv1d(1, 8, 1)
        self.out = nn.Conv1d(16, 1, 1)

    def forward_prob(self, x, x_mask, dur):
        return torch.sigmoid(self.out(torch.cat([x, self.dur_proj(dur)], 1)) * x_mask)

    def forward(self, x, x_mask, dur_r, dur_hat):
        x = torch.relu(self.pre(x)) * x_mask
        return self.forward_prob(x, x_mask, dur_r), self.forward_prob(x, x_mask, dur_hat)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 5, stride=2)
        self.out = nn.Conv1d(4, 1, 3)

    def forward(self, y, y_hat):
        fr = torch.relu(self.conv(y))
        fg = torch.relu(self.conv(y_hat))
        return self.out(fr), self.out(fg), [fr], [fg]


def discriminator_loss(real, gen):
    return torch.mean((1 - real) ** 2) + torch.mean(gen ** 2)


def generator_loss(gen):
    return torch.mean((1 - gen) ** 2)


net_g, net_d, net_dur_disc = SynthesizerTrn(), Discriminator(), DurationDiscriminator()
optim_g = torch.optim.AdamW(net_g.parameters(), 2e-4)
optim_d = torch.optim.AdamW(net_d.parameters(), 2e-4)
optim_dur_disc = torch.optim.AdamW(net_dur_disc.parameters(), 2e-4)
scaler = GradScaler("cpu", enabled=False)

for step in range(3):
    x = torch.randint(1, 20, (2, 12))
    x_lengths = torch.tensor([12, 9])
    spec = torch.randn(2, 8, 12)
    y = torch.randn(2, 1, 48)
    y_hat, l_length, x_mask, (hidden_x, logw, logw_) = net_g(x, x_lengths, spec)

    # Discriminator
    y_d_hat_r, y_d_hat_g, _, _ = net_d(y, y_hat.detach())
    loss_disc_all = discriminator_loss(y_d_hat_r, y_d_hat_g)

    # Duration Discriminator
    y_dur_hat_r, y_dur_hat_g = net_dur_disc(hidden_x, x_mask, logw, logw_.detach())  # ROOT
    loss_dur_disc_all = discriminator_loss(y_dur_hat_r, y_dur_hat_g)
    optim_dur_disc.zero_grad()
    scaler.scale(loss_dur_disc_all).backward()
    scaler.unscale_(optim_dur_disc)
    scaler.step(optim_dur_disc)

    optim_d.zero_grad()
    scaler.scale(loss_disc_all).backward()
    scaler.unscale_(optim_d)
    scaler.step(optim_d)

    # Generator
    y_d_hat_r, y_d_hat_g, fmap_r, fmap_g = net_d(y, y_hat)
    y_dur_hat_r, y_dur_hat_g = net_dur_disc(hidden_x, x_mask, logw, logw_)
    loss_fm = sum(F.l1_loss(g, r.detach()) for r, g in zip(fmap_r, fmap_g))
    loss_gen_all = generator_loss(y_d_hat_g) + loss_fm + torch.sum(l_length) + generator_loss(y_dur_hat_g)
    optim_g.zero_grad()
    scaler.scale(loss_gen_all).backward()
    scaler.unscale_(optim_g)
    scaler.step(optim_g)
    scaler.update()
    print(f"step {step}: loss_g {loss_gen_all.item():.4f} loss_dur_disc {loss_dur_disc_all.item():.4f}")
