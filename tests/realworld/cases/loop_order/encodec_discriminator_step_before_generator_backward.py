"""encodec-pytorch's `train_one_step` runs the discriminator on the real audio, then (after warm-up) backpropagates the discriminator loss and calls `optimizer_disc.step()` before the generator loss is backpropagated; the generator loss's graph goes through the discriminator's feature maps of the real and fake audio, whose saved weights that step has just updated in place, so the generator `loss.backward()` fails.

source: https://github.com/ZhikangNiu/encodec-pytorch/issues/6
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class EncodecModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv1d(1, 8, 4, stride=2, padding=1)
        self.codebook = nn.Parameter(torch.randn(16, 8))
        self.decoder = nn.ConvTranspose1d(8, 1, 4, stride=2, padding=1)

    def forward(self, x):
        z = self.encoder(x)
        flat = z.transpose(1, 2)
        idx = torch.cdist(flat, self.codebook.expand(flat.size(0), -1, -1)).argmin(-1)
        q = self.codebook[idx].transpose(1, 2)
        loss_w = F.mse_loss(z, q.detach()) + F.mse_loss(q, z.detach())
        q = z + (q - z).detach()
        return self.decoder(q), loss_w, idx


class MultiScaleDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(1, 8, 5, padding=2), nn.Conv1d(8, 8, 5, stride=2, padding=2),
                                    nn.Conv1d(8, 1, 3, padding=1)])

    def forward(self, x):
        fmap = []
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if i < len(self.convs) - 1:
                x = F.leaky_relu(x, 0.1)
            fmap.append(x)
        return [x], [fmap]


def disc_loss(logits_real, logits_fake):
    return sum(torch.relu(1 - lr).mean() + torch.relu(1 + lf).mean() for lr, lf in zip(logits_real, logits_fake))


def total_loss(fmap_real, logits_fake, fmap_fake, input_wav, output_wav):
    l_t = F.l1_loss(output_wav, input_wav)
    l_g = sum(torch.relu(1 - lf).mean() for lf in logits_fake)
    l_feat = sum(F.l1_loss(ff, fr) for fr_list, ff_list in zip(fmap_real, fmap_fake) for fr, ff in zip(fr_list, ff_list))
    return l_t + 3 * l_g + 3 * l_feat


def train_one_step(epoch, optimizer, optimizer_disc, model, disc_model, trainloader, config, scheduler, disc_scheduler):
    model.train()
    disc_model.train()
    for input_wav in trainloader:
        optimizer.zero_grad()
        optimizer_disc.zero_grad()
        output, loss_w, _ = model(input_wav)
        logits_real, fmap_real = disc_model(input_wav)
        # train discriminator when epoch > warmup_epoch and train_discriminator is True
        if config.model.train_discriminator and epoch > config.lr_scheduler.warmup_epoch:
            logits_fake, _ = disc_model(output.detach())  # detach to avoid backpropagation to model
            loss_disc = disc_loss(logits_real, logits_fake)
            loss_disc.backward(retain_graph=True)
            optimizer_disc.step()  # ROOT

        logits_fake, fmap_fake = disc_model(output)
        loss_g = total_loss(fmap_real, logits_fake, fmap_fake, input_wav, output)
        loss = loss_g + loss_w
        loss.backward()  # SYMPTOM
        optimizer.step()

        scheduler.step()
        disc_scheduler.step()
    return loss.item()


torch.manual_seed(0)
config = SimpleNamespace(model=SimpleNamespace(train_discriminator=True),
                         lr_scheduler=SimpleNamespace(warmup_epoch=0))
model = EncodecModel()
disc_model = MultiScaleDiscriminator()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, betas=(0.5, 0.9))
optimizer_disc = torch.optim.Adam(disc_model.parameters(), lr=3e-4, betas=(0.5, 0.9))
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
disc_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer_disc, lambda step: 1.0)
trainloader = [torch.randn(2, 1, 64) for _ in range(3)]
for epoch in range(1, 3):
    print(epoch, train_one_step(epoch, optimizer, optimizer_disc, model, disc_model, trainloader, config,
                                scheduler, disc_scheduler))
