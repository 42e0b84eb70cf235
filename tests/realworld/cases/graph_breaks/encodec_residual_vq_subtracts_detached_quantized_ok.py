"""EnCodec's residual vector quantization with the fix its issue links: each layer's residual is computed as `residual - quantized.detach()`, so every layer's input keeps an identity derivative with respect to the encoder output and the commitment loss of every layer, not only the first, pulls the encoder towards its codes; the straight-through reconstruction path is unchanged.

source: https://github.com/facebookresearch/encodec/issues/25
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

DIM, CODEBOOK, N_Q = 8, 16, 4


class EuclideanCodebook(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("embed", torch.randn(CODEBOOK, DIM))

    def forward(self, x):
        dist = torch.cdist(x.reshape(-1, DIM), self.embed)
        embed_ind = dist.argmin(dim=-1).reshape(x.shape[:-1])
        return F.embedding(embed_ind, self.embed), embed_ind


class VectorQuantization(nn.Module):
    def __init__(self, commitment_weight=1.0):
        super().__init__()
        self._codebook = EuclideanCodebook()
        self.commitment_weight = commitment_weight

    def forward(self, x):
        x = x.transpose(1, 2)  # b d n -> b n d
        quantize, embed_ind = self._codebook(x)
        if self.training:
            quantize = x + (quantize - x).detach()
        loss = torch.tensor([0.0], requires_grad=self.training)
        if self.training and self.commitment_weight > 0:
            loss = loss + F.mse_loss(quantize.detach(), x) * self.commitment_weight
        return quantize.transpose(1, 2), embed_ind, loss


class ResidualVectorQuantization(nn.Module):
    def __init__(self, num_quantizers):
        super().__init__()
        self.layers = nn.ModuleList(VectorQuantization() for _ in range(num_quantizers))

    def forward(self, x):
        quantized_out, residual = 0.0, x
        all_losses, all_indices = [], []
        for layer in self.layers:
            quantized, indices, loss = layer(residual)
            residual = residual - quantized.detach()
            quantized_out = quantized_out + quantized
            all_indices.append(indices)
            all_losses.append(loss)
        return quantized_out, torch.stack(all_indices), torch.stack(all_losses)


class TinyCodec(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ELU(), nn.Conv1d(16, DIM, 5, stride=2, padding=2))
        self.quantizer = ResidualVectorQuantization(N_Q)
        self.decoder = nn.Sequential(nn.ConvTranspose1d(DIM, 16, 4, stride=2, padding=1), nn.ELU(), nn.Conv1d(16, 1, 5, padding=2))

    def forward(self, wav):
        emb = self.encoder(wav)
        q, codes, commit = self.quantizer(emb)
        return self.decoder(q), commit


model = TinyCodec().train()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
enc_params = list(model.encoder.parameters())
for step in range(5):
    wav = torch.sin(torch.linspace(0, 20, 64) * (1 + torch.rand(8, 1, 1))) + 0.05 * torch.randn(8, 1, 64)
    recon, commit = model(wav)
    if step == 4:  # read-only probe: encoder gradient contributed by each layer's commitment loss
        norms = [torch.cat([g.flatten() for g in torch.autograd.grad(c.sum(), enc_params, retain_graph=True)]).norm().item()
                 for c in commit]
        print("encoder gradient norm from each layer's commitment loss:", ", ".join(f"{n:.3g}" for n in norms))
    loss = F.l1_loss(recon, wav) + commit.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
