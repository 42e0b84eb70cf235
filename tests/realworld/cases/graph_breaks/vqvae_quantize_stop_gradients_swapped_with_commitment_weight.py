"""deep-vector-quantization's `VQVAEQuantize.forward` builds the VQ-VAE latent loss as `(z_q.detach() - z_e)^2 + commitment_cost * (z_q - z_e.detach())^2`: the stop-gradients are swapped with respect to the 0.25 commitment weight, so the codebook term that trains the embedding vectors gets 0.25 and the commitment term that pulls the encoder output gets 1.0, the reverse of van den Oord et al.; the codebook learns four times slower and the encoder is pinned four times harder to stale codes.

source: https://github.com/karpathy/deep-vector-quantization/commit/b39653a8bb1d36bcd81348ee5b3c9476cd7ca546
kind: bug
symptom: silent
verified: measured from the gradients of the latent loss, the codebook term has weight 0.25 and the commitment term 1.00 (codebook weight 0.25, commitment weight 1.00); the look-alike's are 1.00 and 0.25
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class VQVAEQuantize(nn.Module):
    def __init__(self, num_hiddens, embedding_dim, n_embed):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.n_embed = n_embed
        self.proj = nn.Conv2d(num_hiddens, embedding_dim, 1)
        self.embed = nn.Embedding(n_embed, embedding_dim)

    def forward(self, z):
        B, C, H, W = z.size()
        z_e = self.proj(z).permute(0, 2, 3, 1)
        flatten = z_e.reshape(-1, self.embedding_dim)
        dist = (flatten.pow(2).sum(1, keepdim=True) - 2 * flatten @ self.embed.weight.t()
                + self.embed.weight.pow(2).sum(1, keepdim=True).t())
        _, ind = (-dist).max(1)
        ind = ind.view(B, H, W)
        commitment_cost = 0.25
        z_q = self.embed_code(ind)
        diff = (z_q.detach() - z_e).pow(2).mean() + commitment_cost * (z_q - z_e.detach()).pow(2).mean()  # ROOT
        z_q = z_e + (z_q - z_e).detach()
        return z_q.permute(0, 3, 1, 2), diff, ind

    def embed_code(self, embed_id):
        return F.embedding(embed_id, self.embed.weight)


class VQVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, 32, 4, 2, 1), nn.ReLU())
        self.quantizer = VQVAEQuantize(32, 16, 32)
        self.decoder = nn.Sequential(nn.ConvTranspose2d(16, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 3, 4, 2, 1))

    def forward(self, x):
        z_q, latent_loss, ind = self.quantizer(self.encoder(x))
        return self.decoder(z_q), latent_loss, ind


model = VQVAE()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
images = torch.rand(64, 3, 16, 16)

for step in range(20):
    x = images[torch.randint(0, 64, (16,))]
    x_hat, latent_loss, ind = model(x)
    loss = F.mse_loss(x_hat, x) + latent_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

# Measurement: the weight each standard VQ-VAE term carries in the latent loss, read from its gradients.
vq = model.quantizer
x = images[:16]
h = model.encoder(x)
_, latent_loss, ind = vq(h)
z_e = vq.proj(h).permute(0, 2, 3, 1)
z_q = vq.embed_code(ind)
codebook_term = (z_q - z_e.detach()).pow(2).mean()
commitment_term = (z_q.detach() - z_e).pow(2).mean()
g_loss_embed, g_loss_proj = torch.autograd.grad(latent_loss, [vq.embed.weight, vq.proj.weight])
g_cb, = torch.autograd.grad(codebook_term, vq.embed.weight)
g_cm, = torch.autograd.grad(commitment_term, vq.proj.weight)
print(f"codebook weight {(g_loss_embed.norm() / g_cb.norm()).item():.2f}, "
      f"commitment weight {(g_loss_proj.norm() / g_cm.norm()).item():.2f}")
