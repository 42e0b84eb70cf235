"""audiolm-pytorch's SoundStream after the fix of issue 48 (commit 5058cc4) returns the encoder_attn and decoder_attn parameters from non_discr_parameters() too, so the generator's optimizer updates the attention layers with the encoder and the decoder.

source: https://github.com/lucidrains/audiolm-pytorch/issues/48
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn


def hinge_discr_loss(fake, real):
    return (F.relu(1 + fake) + F.relu(1 - real)).mean()


def hinge_gen_loss(fake):
    return -fake.mean()


class LocalMHA(nn.Module):  # stands for local_attention.LocalMHA (prenorm, causal windowed attention)
    def __init__(self, dim, heads=2):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        x = self.norm(x)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


class ResidualVQ(nn.Module):  # stands for vector_quantize_pytorch.ResidualVQ: one codebook, straight-through
    def __init__(self, dim, codebook_size=16):
        super().__init__()
        self.register_buffer("codebook", torch.randn(codebook_size, dim))

    def forward(self, x):
        indices = torch.cdist(x, self.codebook.expand(x.shape[0], -1, -1)).argmin(-1)
        quantize = self.codebook[indices]
        return x + (quantize - x).detach(), indices, F.mse_loss(quantize.detach(), x)


class SoundStream(nn.Module):  # strides, residual units, multi-scale discriminators and feature loss reduced
    def __init__(self, channels=8, codebook_dim=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv1d(1, channels, 7, padding=3), nn.ELU(),
                                     nn.Conv1d(channels, codebook_dim, 4, stride=4))
        self.encoder_attn = LocalMHA(codebook_dim)
        self.rq = ResidualVQ(codebook_dim)
        self.decoder_attn = LocalMHA(codebook_dim)
        self.decoder = nn.Sequential(nn.ConvTranspose1d(codebook_dim, channels, 4, stride=4), nn.ELU(),
                                     nn.Conv1d(channels, 1, 7, padding=3))
        self.stft_discriminator = nn.Sequential(nn.Conv1d(1, 8, 15, stride=4), nn.LeakyReLU(0.1), nn.Conv1d(8, 1, 3))

    def non_discr_parameters(self):
        return [
            *self.encoder.parameters(),
            *self.decoder.parameters(),
            *self.encoder_attn.parameters(),
            *self.decoder_attn.parameters()
        ]

    def forward(self, x, return_discr_loss=False):
        orig_x = x.clone()
        x = self.encoder(x).transpose(1, 2)
        x = self.encoder_attn(x) + x
        x, indices, commit_loss = self.rq(x)
        x = self.decoder_attn(x) + x
        recon_x = self.decoder(x.transpose(1, 2))
        if return_discr_loss:
            real, fake = orig_x.clone(), recon_x.detach()
            return hinge_discr_loss(self.stft_discriminator(fake), self.stft_discriminator(real))
        recon_loss = F.mse_loss(orig_x, recon_x)
        adversarial_loss = hinge_gen_loss(self.stft_discriminator(recon_x))
        return recon_loss + adversarial_loss + commit_loss


class SoundStreamTrainer:  # accelerate, EMA, datasets, logging and gradient accumulation left out
    def __init__(self, soundstream, lr=3e-4):
        self.soundstream = soundstream
        self.optim = torch.optim.Adam(soundstream.non_discr_parameters(), lr=lr)
        self.discr_optim = torch.optim.Adam(soundstream.stft_discriminator.parameters(), lr=lr)

    def train_step(self, wave):
        loss = self.soundstream(wave)
        loss.backward()
        self.optim.step()
        self.optim.zero_grad()
        self.discr_optim.zero_grad()
        discr_loss = self.soundstream(wave, return_discr_loss=True)
        self.discr_only = torch.autograd.grad(discr_loss, list(self.soundstream.stft_discriminator.parameters()),
                                              retain_graph=True)  # measurement: the discriminator loss's own gradient
        discr_loss.backward()
        self.discr_grad = [p.grad.clone() for p in self.soundstream.stft_discriminator.parameters()]
        self.discr_optim.step()
        return discr_loss


torch.manual_seed(0)
soundstream = SoundStream()
trainer = SoundStreamTrainer(soundstream)
before = {n: p.detach().clone() for n, p in soundstream.named_parameters()}
for step in range(4):
    trainer.train_step(torch.randn(2, 1, 256))
for name, p in soundstream.named_parameters():
    if not name.startswith("stft"):
        print(name, "max change", round((p.detach() - before[name]).abs().max().item(), 6))
