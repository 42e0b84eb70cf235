"""SpeechBrain's Fbank lobe computes the STFT, the magnitude and the filterbank inside `with torch.no_grad():`, so with `Fbank(requires_grad=True)` the Filterbank's learnable f_central and band parameters, which the optimizer holds, never get a gradient and the filters never move while the classifier on top trains.

source: https://github.com/speechbrain/speechbrain/pull/1081
kind: bug
symptom: silent
verified: after 5 training steps the filterbank's f_central and band have grad None and are unchanged (max change 0.0; about 5e-3 with the fix) while the classifier's weights change
"""
import math

import torch


class STFT(torch.nn.Module):  # speechbrain.processing.features.STFT reduced: real and imaginary parts in the last dimension
    def __init__(self, sample_rate, n_fft=400, win_length=25, hop_length=10):
        super().__init__()
        self.n_fft = n_fft
        self.win_length = int(round((sample_rate / 1000.0) * win_length))
        self.hop_length = int(round((sample_rate / 1000.0) * hop_length))
        self.window = torch.hamming_window(self.win_length)

    def forward(self, x):
        stft = torch.stft(x, self.n_fft, self.hop_length, self.win_length, self.window, return_complex=True)
        return torch.view_as_real(stft).transpose(2, 1)  # (batch, time, n_stft, 2)


def spectral_magnitude(stft, power=1, log=False, eps=1e-14):
    spectr = stft.pow(2).sum(-1)
    spectr = spectr.pow(power)
    if log:
        return torch.log(spectr + eps)
    return spectr


class Filterbank(torch.nn.Module):  # triangular filters only, log-mel without the top_db floor
    def __init__(self, n_mels=40, f_min=0, f_max=8000, n_fft=400, sample_rate=16000,
                 amin=1e-10, param_change_factor=1.0, freeze=True):
        super().__init__()
        self.n_mels, self.sample_rate, self.amin = n_mels, sample_rate, amin
        self.freeze, self.param_change_factor = freeze, param_change_factor
        self.n_stft = n_fft // 2 + 1
        mel = torch.linspace(self._to_mel(f_min), self._to_mel(f_max), n_mels + 2)
        hz = self._to_hz(mel)
        band = hz[1:] - hz[:-1]
        self.band = band[:-1]
        self.f_central = hz[1:-1]
        if not self.freeze:
            self.f_central = torch.nn.Parameter(self.f_central / (self.sample_rate * self.param_change_factor))
            self.band = torch.nn.Parameter(self.band / (self.sample_rate * self.param_change_factor))
        all_freqs = torch.linspace(0, self.sample_rate // 2, self.n_stft)
        self.all_freqs_mat = all_freqs.repeat(self.f_central.shape[0], 1)

    def forward(self, spectrogram):
        f_central_mat = self.f_central.repeat(self.all_freqs_mat.shape[1], 1).transpose(0, 1)
        band_mat = self.band.repeat(self.all_freqs_mat.shape[1], 1).transpose(0, 1)
        if not self.freeze:
            f_central_mat = f_central_mat * (self.sample_rate * self.param_change_factor * self.param_change_factor)
            band_mat = band_mat * (self.sample_rate * self.param_change_factor * self.param_change_factor)
        slope = (self.all_freqs_mat - f_central_mat) / band_mat
        fbank_matrix = torch.max(torch.zeros(1), torch.min(slope + 1.0, -slope + 1.0)).transpose(0, 1)
        fbanks = torch.matmul(spectrogram, fbank_matrix)
        return 10 * torch.log10(torch.clamp(fbanks, min=self.amin))

    @staticmethod
    def _to_mel(hz):
        return 2595 * math.log10(1 + hz / 700)

    @staticmethod
    def _to_hz(mel):
        return 700 * (10 ** (mel / 2595) - 1)


class Fbank(torch.nn.Module):
    def __init__(self, requires_grad=False, sample_rate=16000, n_fft=400, n_mels=40):
        super().__init__()
        self.requires_grad = requires_grad
        self.compute_STFT = STFT(sample_rate=sample_rate, n_fft=n_fft)
        self.compute_fbanks = Filterbank(sample_rate=sample_rate, n_fft=n_fft, n_mels=n_mels,
                                         f_max=sample_rate / 2, freeze=not requires_grad)

    def forward(self, wav):
        with torch.no_grad():  # ROOT

            STFT = self.compute_STFT(wav)
            mag = spectral_magnitude(STFT)
            fbanks = self.compute_fbanks(mag)

        return fbanks


torch.manual_seed(0)
compute_features = Fbank(requires_grad=True)
classifier = torch.nn.Sequential(torch.nn.Linear(40, 32), torch.nn.LeakyReLU(), torch.nn.Linear(32, 4))
modules = torch.nn.ModuleDict({"compute_features": compute_features, "classifier": classifier})
optimizer = torch.optim.Adam(modules.parameters(), lr=1e-3)
f_central0 = compute_features.compute_fbanks.f_central.detach().clone()
band0 = compute_features.compute_fbanks.band.detach().clone()
head0 = classifier[0].weight.detach().clone()
for step in range(5):
    wavs, labels = torch.randn(8, 4000), torch.randint(0, 4, (8,))
    feats = modules["compute_features"](wavs)
    logits = modules["classifier"](feats.mean(dim=1))
    loss = torch.nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
fb = compute_features.compute_fbanks
print("f_central grad:", None if fb.f_central.grad is None else fb.f_central.grad.abs().sum().item())
print("max change of f_central:", (fb.f_central.detach() - f_central0).abs().max().item())
print("max change of band:", (fb.band.detach() - band0).abs().max().item())
print("max change of the classifier's first weight:", (classifier[0].weight.detach() - head0).abs().max().item())
