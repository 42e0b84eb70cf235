"""RQ-VAE-Recommender's `Quantize` layer returns only its straight-through embeddings (`x + (codeword - x).detach()`), and `RqVae.forward` feeds those same embeddings both to the decoder and to the RQ-VAE codebook/commitment loss. Through the straight-through expression the codebook lookup is detached, so the codebook term never reaches the codebook: every `Quantize.embedding.weight.grad` stays None, the codewords never move from their initial values, and the encoder drifts away from them: after training the codebooks explain almost none of the encoder output, with no error raised.

source: https://github.com/EdoardoBotta/RQ-VAE-Recommender/issues/24
kind: bug
symptom: silent
verified: after 300 steps the codebook grads are [None, None], the codebooks moved by 0 and the share of the encoder output left unexplained by the codebooks is 0.9941 (11.2725 before training); in the look-alike the codebooks move by 0.778 and the unexplained share ends at 0.3787
"""
from dataclasses import dataclass

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
IN_DIM, EMB_DIM, CODES, LAYERS = 24, 8, 16, 2


@dataclass
class QuantizeOutput:
    embeddings: torch.Tensor
    ids: torch.Tensor


class Quantize(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(CODES, EMB_DIM)

    def forward(self, x):
        ids = torch.cdist(x, self.embedding.weight).argmin(dim=1)
        codeword = self.embedding(ids)
        return QuantizeOutput(embeddings=x + (codeword - x).detach(), ids=ids)  # ROOT


class RqVaeLoss(nn.Module):
    def __init__(self, commitment_weight=0.25):
        super().__init__()
        self.commitment_weight = commitment_weight

    def forward(self, residuals, embs):
        codebook = ((residuals.detach() - embs) ** 2).sum(-1)
        commitment = ((residuals - embs.detach()) ** 2).sum(-1)
        return (codebook + self.commitment_weight * commitment).sum(-1).mean()


class RqVae(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(IN_DIM, 32), nn.SiLU(), nn.Linear(32, EMB_DIM))
        self.decoder = nn.Sequential(nn.Linear(EMB_DIM, 32), nn.SiLU(), nn.Linear(32, IN_DIM))
        self.layers = nn.ModuleList([Quantize() for _ in range(LAYERS)])
        self.rqvae_loss = RqVaeLoss()

    def get_semantic_ids(self, x):
        res = self.encoder(x)
        embs, residuals = [], []
        for layer in self.layers:
            residuals.append(res)
            quantized = layer(res)
            embs.append(quantized.embeddings)
            res = res - quantized.embeddings
        return torch.stack(embs, dim=1), torch.stack(residuals, dim=1)

    def forward(self, x):
        embs, residuals = self.get_semantic_ids(x)
        x_hat = self.decoder(embs.sum(dim=1))
        reconstruction = ((x_hat - x) ** 2).sum(-1).mean()
        return reconstruction + self.rqvae_loss(residuals, embs)


def quantization_error(model, x):
    """Share of the encoder output that the codebooks leave unexplained."""
    with torch.no_grad():
        enc = res = model.encoder(x)
        for layer in model.layers:
            res = res - layer.embedding(torch.cdist(res, layer.embedding.weight).argmin(dim=1))
        return (res.pow(2).sum(-1).mean() / enc.pow(2).sum(-1).mean()).item()


items = torch.randn(512, IN_DIM)
model = RqVae()
start = [layer.embedding.weight.detach().clone() for layer in model.layers]
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
before = quantization_error(model, items)
for step in range(300):
    batch = items[torch.randint(0, len(items), (64,))]
    loss = model(batch)
    opt.zero_grad()
    loss.backward()
    grads = [layer.embedding.weight.grad for layer in model.layers]
    opt.step()
after = quantization_error(model, items)
moved = max((layer.embedding.weight - s).abs().max().item() for layer, s in zip(model.layers, start))
print("codebook grads:", [None if g is None else round(g.abs().sum().item(), 4) for g in grads])
print(f"codebooks moved by {moved:.4g}")
print(f"quantization error {before:.4f} -> {after:.4f}")
