"""StyleMapGAN generator step: the adversarial loss and the w-reconstruction loss are backpropagated separately.

source: https://github.com/naver-ai/StyleMapGAN/issues/16
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mapping = nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.2))
        self.generator = nn.Linear(8, 16)
        self.encoder = nn.Linear(16, 8)
        self.discriminator = nn.Linear(16, 1)

    def forward(self, z, mode):
        if mode == "G":
            stylecode = self.mapping(z)
            fake_img = self.generator(stylecode)
            adv_loss = nn.functional.softplus(-self.discriminator(fake_img))
            w_rec_loss = (self.encoder(fake_img) - stylecode).pow(2).mean(dim=1)
            return adv_loss, w_rec_loss, stylecode


model = Model()
g_optim = torch.optim.Adam(list(model.mapping.parameters()) + list(model.generator.parameters()),
                           lr=2e-3)
e_optim = torch.optim.Adam(model.encoder.parameters(), lr=2e-3)
lambda_adv_loss, lambda_w_rec_loss = 1.0, 1.0

adv_loss, w_rec_loss, stylecode = model(torch.randn(4, 8), "G")
adv_loss = adv_loss.mean()
w_rec_loss = w_rec_loss.mean()
g_loss = adv_loss * lambda_adv_loss
g_optim.zero_grad()
e_optim.zero_grad()
g_loss.backward()  # ROOT
(w_rec_loss * lambda_w_rec_loss).backward()  # SYMPTOM
g_optim.step()
e_optim.step()
