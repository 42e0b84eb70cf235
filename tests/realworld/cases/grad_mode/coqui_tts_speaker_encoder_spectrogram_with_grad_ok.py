"""Coqui TTS's ResNetSpeakerEncoder.forward after PR 2364 computes its input spectrogram with grad enabled: the encoder's weights stay frozen (requires_grad False), and the speaker consistency loss on the generated waveform reaches the VITS generator through the encoder.

source: https://github.com/coqui-ai/TTS/pull/2364
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn


class PreEmphasis(nn.Module):
    def __init__(self, coefficient=0.97):
        super().__init__()
        self.register_buffer("filter", torch.FloatTensor([-coefficient, 1.0]).unsqueeze(0).unsqueeze(0))

    def forward(self, x):
        x = F.pad(x.unsqueeze(1), (1, 0), "reflect")
        return F.conv1d(x, self.filter).squeeze(1)


class MelSpectrogram(nn.Module):  # stands for torchaudio.transforms.MelSpectrogram: power STFT times a fixed filterbank
    def __init__(self, n_fft=64, hop_length=16, n_mels=16):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("fb", torch.rand(n_fft // 2 + 1, n_mels))

    def forward(self, x):
        spec = torch.stft(x, self.n_fft, self.hop_length, window=torch.hamming_window(self.n_fft), return_complex=True)
        return torch.matmul(spec.abs().pow(2).transpose(1, 2), self.fb).transpose(1, 2)


class ResNetSpeakerEncoder(nn.Module):  # the SE-ResNet blocks reduced to one strided conv per stage; ASP pooling kept
    def __init__(self, input_dim=16, proj_dim=32, num_filters=(4, 8, 8, 8), log_input=True):
        super().__init__()
        self.input_dim, self.log_input, self.use_torch_spec = input_dim, log_input, True
        self.conv1 = nn.Conv2d(1, num_filters[0], kernel_size=3, stride=1, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.bn1 = nn.BatchNorm2d(num_filters[0])
        self.layers = nn.Sequential(*[nn.Sequential(nn.Conv2d(i, o, 3, stride=s, padding=1), nn.ReLU())
                                      for i, o, s in zip(num_filters, num_filters[1:], (2, 2, 2))])
        self.instancenorm = nn.InstanceNorm1d(input_dim)
        self.torch_spec = nn.Sequential(PreEmphasis(), MelSpectrogram(n_mels=input_dim))
        outmap_size = int(self.input_dim / 8)
        self.attention = nn.Sequential(nn.Conv1d(num_filters[3] * outmap_size, 16, kernel_size=1), nn.ReLU(),
                                       nn.Conv1d(16, num_filters[3] * outmap_size, kernel_size=1), nn.Softmax(dim=2))
        self.fc = nn.Linear(num_filters[3] * outmap_size * 2, proj_dim)

    def forward(self, x, l2_norm=False):
        x.squeeze_(1)
        if self.use_torch_spec:
            x = self.torch_spec(x)
        if self.log_input:
            x = (x + 1e-6).log()
        x = self.instancenorm(x).unsqueeze(1)
        x = self.bn1(self.relu(self.conv1(x)))
        x = self.layers(x)
        x = x.reshape(x.size()[0], -1, x.size()[-1])
        w = self.attention(x)
        mu = torch.sum(x * w, dim=2)
        sg = torch.sqrt((torch.sum((x**2) * w, dim=2) - mu**2).clamp(min=1e-5))
        x = self.fc(torch.cat((mu, sg), 1))
        if l2_norm:
            x = torch.nn.functional.normalize(x, p=2, dim=1)
        return x


torch.manual_seed(0)
speaker_encoder = ResNetSpeakerEncoder().eval()
for param in speaker_encoder.parameters():  # the pretrained speaker encoder is frozen
    param.requires_grad = False
waveform_decoder = nn.Sequential(nn.ConvTranspose1d(8, 4, 16, stride=8, padding=4), nn.Tanh(),
                                 nn.ConvTranspose1d(4, 1, 16, stride=8, padding=4), nn.Tanh())  # stands for the VITS decoder
z, wav_seg = torch.randn(2, 8, 16), torch.randn(2, 1, 1024) * 0.3
o = waveform_decoder(z)
wavs_batch = torch.cat((wav_seg, o), dim=0)
pred_embs = speaker_encoder.forward(wavs_batch, l2_norm=True)
gt_spk_emb, syn_spk_emb = torch.chunk(pred_embs, 2, dim=0)
loss_se = -torch.nn.functional.cosine_similarity(gt_spk_emb, syn_spk_emb).mean() * 9.0
loss_mel = F.l1_loss(o, wav_seg) * 45.0  # stands for the generator's other loss terms
last_weight = waveform_decoder[2].weight
grad_total, = torch.autograd.grad(loss_mel + loss_se, last_weight, retain_graph=True)
grad_mel, = torch.autograd.grad(loss_mel, last_weight)
print("syn_spk_emb.requires_grad", syn_spk_emb.requires_grad, "loss_se", round(loss_se.item(), 4))
print("decoder grad contributed by the speaker consistency loss:", (grad_total - grad_mel).norm().item())
