"""Music-Source-Separation-Training after "spec_rmse stability fix": `spec_rmse_loss` takes `(loss.mean(dims) + eps).sqrt()` with `eps=1e-8`, so a silent chunk whose estimate equals its target contributes a finite square-root gradient (zero through the zero error) and the separator trains with finite weights.

source: https://github.com/ZFTurbo/Music-Source-Separation-Training/commit/2fccee8f375321bae489aa69bcb2a24e703480a1
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def spec_rmse_loss(estimate, sources, stft_config, eps=1e-8):
    """RMSE in the complex STFT domain (real and imaginary parts as pairs)."""
    lenc = estimate.shape[-1]
    spec_estimate = estimate.reshape(-1, lenc)
    spec_sources = sources.reshape(-1, lenc)
    spec_estimate = torch.view_as_real(torch.stft(spec_estimate, **stft_config, return_complex=True))
    spec_sources = torch.view_as_real(torch.stft(spec_sources, **stft_config, return_complex=True))
    new_shape = estimate.shape[:-1] + spec_estimate.shape[-3:]
    spec_estimate = spec_estimate.view(*new_shape)
    spec_sources = spec_sources.view(*new_shape)

    loss = F.mse_loss(spec_estimate, spec_sources, reduction='none')
    dims = tuple(range(2, loss.dim()))
    loss = (loss.mean(dims) + eps).sqrt().mean(dim=(0, 1))
    return loss


def choice_loss(loss_names, stft_config, coef=1.0):
    losses = []
    if 'spec_rmse_loss' in loss_names:
        losses.append(lambda y_pred, y_true: spec_rmse_loss(y_pred, y_true, stft_config) * coef)
    return lambda y_pred, y_true: sum(fn(y_pred, y_true) for fn in losses)


class MaskSeparator(nn.Module):
    """A tiny masking separator: per-stem sigmoid masks over the stereo mixture."""

    def __init__(self, stems=2, channels=2):
        super().__init__()
        self.stems, self.channels = stems, channels
        self.net = nn.Sequential(nn.Conv1d(channels, 16, 9, padding=4), nn.GELU(),
                                 nn.Conv1d(16, stems * channels, 9, padding=4))

    def forward(self, mix):
        masks = torch.sigmoid(self.net(mix)).view(mix.shape[0], self.stems, self.channels, -1)
        return masks * mix.unsqueeze(1)


stft_config = dict(n_fft=64, hop_length=16, win_length=64, window=torch.hann_window(64), center=True)
model = MaskSeparator()
loss_fn = choice_loss(['spec_rmse_loss'], stft_config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    sources = torch.randn(4, 2, 2, 512) * 0.1  # (batch, stems, channels, samples)
    sources[1] = 0.0  # a silent chunk
    mix = sources.sum(1)
    y_pred = model(mix)
    loss = loss_fn(y_pred, sources)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    bad = any(not torch.isfinite(p).all() for p in model.parameters())
    print(f"step {step}: loss {loss.item():.4f}, non-finite weights: {bad}")
