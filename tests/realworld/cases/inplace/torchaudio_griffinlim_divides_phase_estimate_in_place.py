"""torchaudio's griffinlim normalizes its phase estimate with angles.div_(complex_norm(angles)...): complex_norm saved angles for its backward (pow), and the in-place divide bumps its version, so backpropagating a waveform loss through GriffinLim into the model that predicts the magnitude spectrogram fails.

source: https://github.com/pytorch/audio/issues/729
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch


def complex_norm(complex_tensor, power=1.0):
    return complex_tensor.pow(2.).sum(-1).pow(0.5 * power)


def griffinlim(specgram, window, n_fft, hop_length, win_length, power, n_iter, momentum, length, rand_init):
    specgram = specgram.pow(1 / power)
    angles = 2 * torch.pi * torch.rand(specgram.size())
    angles = torch.stack([angles.cos(), angles.sin()], dim=-1).to(dtype=specgram.dtype)
    specgram = specgram.unsqueeze(-1).expand_as(angles)
    rebuilt = torch.tensor(0.)
    for _ in range(n_iter):
        tprev = rebuilt
        inverse = torch.istft(torch.view_as_complex(specgram * angles), n_fft=n_fft, hop_length=hop_length,
                              win_length=win_length, window=window, length=length)
        rebuilt = torch.view_as_real(torch.stft(inverse, n_fft, hop_length, win_length, window, center=True,
                                                pad_mode="reflect", normalized=False, onesided=True, return_complex=True))
        angles = rebuilt - tprev.mul_(momentum / (1 + momentum))
        angles = angles.div_(complex_norm(angles).add_(1e-16).unsqueeze(-1).expand_as(angles))  # ROOT
    return torch.istft(torch.view_as_complex(specgram * angles), n_fft=n_fft, hop_length=hop_length,
                       win_length=win_length, window=window, length=length)


class GriffinLim(torch.nn.Module):
    def __init__(self, n_fft=400, n_iter=32, win_length=None, hop_length=None, power=2., momentum=0.99, length=None):
        super().__init__()
        self.n_fft, self.n_iter = n_fft, n_iter
        self.win_length = win_length if win_length is not None else n_fft
        self.hop_length = hop_length if hop_length is not None else self.win_length // 2
        self.register_buffer("window", torch.hann_window(self.win_length))
        self.power, self.momentum, self.length = power, momentum, length

    def forward(self, specgram):
        return griffinlim(specgram, self.window, self.n_fft, self.hop_length, self.win_length, self.power,
                          self.n_iter, self.momentum, self.length, True)


torch.manual_seed(0)
x = torch.rand(1, 4000)
spec = torch.view_as_real(torch.stft(x, n_fft=512, hop_length=160, win_length=320, window=torch.hann_window(320), return_complex=True))
mag = spec.pow(2).sum(-1).transpose(1, -1)
model = torch.nn.Linear(257, 257)
out = model(mag).transpose(1, -1)
resyn = GriffinLim(n_fft=512, hop_length=160, win_length=320, n_iter=4, length=4000)
wav = resyn(out.abs())
optimizer = torch.optim.Adam(model.parameters(), lr=0.0001)
loss = torch.nn.functional.mse_loss(wav, x)
loss.backward()  # SYMPTOM
optimizer.step()
print("loss", loss.item(), "grad norm", model.weight.grad.norm().item())
