"""PCAE's `VAE_finetuning` after its fix: the AdamW optimizer is built from the `VAE` wrapper's parameters (`vae.parameters()`), which hold the shared BART modules and the wrapper's own latent layers `z_linear` and `linear`, so every layer that gets a gradient is stepped.

source: https://github.com/ImKeTT/PCAE/commit/1f4b7cdb855818053cbc637f23080d811d1447a6
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, D, NZ, T = 40, 32, 8, 10


class TinySeq2Seq(nn.Module):
    """Stands in for `BartForConditionalGeneration`: shared embedding, encoder, decoder, lm head."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Embedding(VOCAB, D)
        self.encoder = nn.GRU(D, D, batch_first=True)
        self.decoder = nn.GRU(D, D, batch_first=True)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)


class VAE(nn.Module):
    def __init__(self, encoder, decoder, shared, lm_head):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.shared, self.lm_head = shared, lm_head
        self.z_linear = nn.Linear(D, 2 * NZ, bias=False)
        self.linear = nn.Linear(NZ, D, bias=False)

    def connect(self, pooled):
        mean, logvar = self.z_linear(pooled).chunk(2, -1)
        z = mean + torch.randn_like(mean) * (0.5 * logvar).exp()
        kl = 0.5 * (mean.pow(2) + logvar.exp() - logvar - 1).sum(-1)
        return z, kl

    def forward(self, ids, beta):
        enc, _ = self.encoder(self.shared(ids))
        z, kl = self.connect(enc[:, -1])
        hidden = self.linear(z).unsqueeze(0)
        dec, _ = self.decoder(self.shared(ids[:, :-1]), hidden)
        rec = F.cross_entropy(self.lm_head(dec).transpose(1, 2), ids[:, 1:])
        return rec, kl.mean(), rec + beta * kl.mean()


def VAE_finetuning(data, steps=60):
    model = TinySeq2Seq()
    vae = VAE(model.encoder, model.decoder, model.shared, model.lm_head)
    optimizer = torch.optim.AdamW(vae.parameters(), lr=3e-3)
    before = [p.detach().clone() for p in (vae.z_linear.weight, vae.linear.weight)]
    vae.train()
    for step in range(steps):
        batch = data[torch.randint(0, len(data), (16,))]
        rec, kl, loss = vae(batch, beta=min(1.0, step / 30))
        optimizer.zero_grad()
        loss.backward()
        grad_norm = vae.z_linear.weight.grad.norm().item()
        optimizer.step()
    moved = max((p - b).abs().max().item() for p, b in zip((vae.z_linear.weight, vae.linear.weight), before))
    return moved, grad_norm, kl.item(), rec.item()


data = torch.randint(0, VOCAB, (64, T))
moved, grad_norm, kl, rec = VAE_finetuning(data)
print(f"latent layers moved by {moved:.3g} (last z_linear grad norm {grad_norm:.3g}); final KL {kl:.3g}, reconstruction {rec:.3f}")
