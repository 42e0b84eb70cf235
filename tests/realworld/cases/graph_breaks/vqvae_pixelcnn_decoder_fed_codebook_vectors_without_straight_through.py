"""VQ-VAE-PixelCNN's `VectorQuantizer.forward` picks the nearest codebook entry with `argmin` and returns the embedding looked up by that index; `VQVAE.get_loss` then decodes that quantised tensor directly. The lookup by index has no gradient path back to the encoder output, so the reconstruction loss trains the decoder (and the codebook) but never reaches the encoder: the encoder learns only from the small commitment term, and the reconstruction stays poor, with no error. The fix adds the straight-through estimator `z_q = z_e + (z_q - z_e).detach()` before decoding.

source: https://github.com/KimRass/VQ-VAE-PixelCNN/commit/769435aa50334414ebaa7ccbe952214c819b8565
kind: bug
symptom: silent
verified: with the commitment weight set to 0 the loss gives the encoder a gradient of norm 0.0000 (the look-alike: 0.0170), and after 150 steps the reconstruction error is 0.1130 against 0.0258 in the look-alike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class Encoder(nn.Module):
    def __init__(self, channels, hidden_dim):
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(channels, hidden_dim, 4, 2, 1), nn.ReLU(),
                                    nn.Conv2d(hidden_dim, hidden_dim, 4, 2, 1), nn.ReLU(),
                                    nn.Conv2d(hidden_dim, hidden_dim, 1))

    def forward(self, x):
        return self.layers(x)


class Decoder(nn.Module):
    def __init__(self, channels, hidden_dim):
        super().__init__()
        self.layers = nn.Sequential(nn.ConvTranspose2d(hidden_dim, hidden_dim, 4, 2, 1), nn.ReLU(),
                                    nn.ConvTranspose2d(hidden_dim, channels, 4, 2, 1))

    def forward(self, x):
        return self.layers(x)


class VectorQuantizer(nn.Module):
    def __init__(self, n_embeds, hidden_dim):
        super().__init__()
        self.embed_space = nn.Embedding(n_embeds, hidden_dim)
        self.embed_space.weight.data.uniform_(-1 / n_embeds, 1 / n_embeds)

    def forward(self, x):
        b, c, h, w = x.shape
        flat = x.permute(0, 2, 3, 1).reshape(-1, c)
        squared_dist = ((flat.unsqueeze(1) - self.embed_space.weight.unsqueeze(0)) ** 2).sum(dim=2)
        argmin = torch.argmin(squared_dist, dim=1)
        return self.embed_space(argmin).view(b, h, w, c).permute(0, 3, 1, 2)


class VQVAE(nn.Module):
    def __init__(self, channels=1, n_embeds=16, hidden_dim=16):
        super().__init__()
        self.enc = Encoder(channels, hidden_dim)
        self.vect_quant = VectorQuantizer(n_embeds, hidden_dim)
        self.dec = Decoder(channels, hidden_dim)

    def forward(self, ori_image):
        return self.dec(self.vect_quant(self.enc(ori_image)))

    def get_loss(self, ori_image, commit_weight=0.25):
        z_e = self.enc(ori_image)
        z_q = self.vect_quant(z_e)
        vq_loss = F.mse_loss(z_e.detach(), z_q)
        commit_loss = commit_weight * F.mse_loss(z_e, z_q.detach())
        recon_image = self.dec(z_q)  # ROOT
        recon_loss = F.mse_loss(recon_image, ori_image)
        return recon_loss + vq_loss + commit_loss


def make_images(n, g):
    yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    cx, cy = torch.rand(n, 1, 1, generator=g) * 10 + 3, torch.rand(n, 1, 1, generator=g) * 10 + 3
    return (((xx - cx) ** 2 + (yy - cy) ** 2) < 12).float().unsqueeze(1)


def encoder_grad_norm(model, images):
    model.zero_grad()
    model.get_loss(images, commit_weight=0.0).backward()
    norms = [p.grad.norm() for p in model.enc.parameters() if p.grad is not None]
    model.zero_grad()
    return torch.stack(norms).norm().item() if norms else 0.0


g = torch.Generator().manual_seed(0)
images = make_images(256, g)
model = VQVAE()
print(f"encoder gradient norm without the commitment term: {encoder_grad_norm(model, images[:32]):.4f}")
optim = torch.optim.Adam(model.parameters(), lr=2e-3)
for step in range(150):
    batch = images[torch.randint(0, 256, (32,), generator=g)]
    loss = model.get_loss(batch)
    optim.zero_grad()
    loss.backward()
    optim.step()
with torch.no_grad():
    print(f"reconstruction error after training: {F.mse_loss(model(images), images).item():.4f}")
