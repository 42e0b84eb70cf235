"""trainer_G is built over the encoder parameters and trainer_E over the decoder parameters.

source: https://github.com/wiseodd/controlled-text-generation/issues/15
kind: bug
symptom: silent
verified: model.decoder.weight and model.encoder.weight never change
"""
import torch
import torch.nn as nn
import torch.optim as optim


class RNN_VAE(nn.Module):
    def __init__(self, h_dim=8, z_dim=4):
        super().__init__()
        self.encoder = nn.Linear(h_dim, 2 * z_dim)
        self.decoder = nn.Linear(z_dim, h_dim)
        self.encoder_params = list(self.encoder.parameters())
        self.decoder_params = list(self.decoder.parameters())

    def forward_encoder(self, x):
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar), mu, logvar

    def forward_decoder(self, z):
        return self.decoder(z)


torch.manual_seed(0)
model = RNN_VAE()
lr = 1e-3
trainer_G = optim.Adam(model.encoder_params, lr=lr)  # ROOT
trainer_E = optim.Adam(model.decoder_params, lr=lr)
x = torch.randn(16, 8)
for it in range(5):
    z, mu, logvar = model.forward_encoder(x)
    loss_G = ((model.forward_decoder(z.detach()) - x) ** 2).mean()
    loss_G.backward()
    trainer_G.step()
    model.zero_grad()

    z, mu, logvar = model.forward_encoder(x)
    loss_E = 0.5 * torch.mean(torch.exp(logvar) + mu ** 2 - 1 - logvar)
    loss_E.backward()
    trainer_E.step()
    model.zero_grad()
