"""AGIS-Net generator update: loss_1 is backpropagated with retain_graph=True because loss_2, backpropagated next, goes through the same generator graph.

source: https://github.com/ueoo/AGIS-Net/issues/8
kind: lookalike
verified: both backward calls run without error; the shared encoder then holds a gradient of 0.012 (max abs)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv2d(3, 8, 3, padding=1)
        self.shape_decoder = nn.Conv2d(8, 1, 3, padding=1)
        self.texture_decoder = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, x):
        h = F.relu(self.encoder(x))
        return torch.sigmoid(self.shape_decoder(h)), torch.tanh(self.texture_decoder(h))


torch.manual_seed(0)
netG = Generator()
optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_A = torch.randn(2, 3, 16, 16)
real_shape, real_texture = torch.rand(2, 1, 16, 16), torch.rand(2, 3, 16, 16) * 2 - 1

fake_shape, fake_texture = netG(real_A)
loss_G_L1_B = F.l1_loss(fake_shape, real_shape)
loss_G_L1_C = F.l1_loss(fake_texture, real_texture)
optimizer_G.zero_grad()
loss_G_L1_B.backward(retain_graph=True)
loss_G_L1_C.backward()
grad_two_calls = netG.encoder.weight.grad.clone()
optimizer_G.step()
print(grad_two_calls.abs().max().item())
