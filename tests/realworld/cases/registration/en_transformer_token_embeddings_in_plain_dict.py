"""En-transformer's `EnTransformer.__init__` keeps its token embeddings in a plain Python dict (`{"tok": nn.Embedding(...), "proj": nn.Linear(...)}`) and `forward` picks one by the input dtype: a dict is not a registered submodule, so neither embedding is in `model.parameters()` or the state dict, the optimizer built from `model.parameters()` never sees them, and the atom-type embedding stays at its random initialisation for the whole training.

source: https://github.com/lucidrains/En-transformer/commit/1ed89c0618ea3ab7c83d6e0da9fdee0621b07f16
kind: bug
symptom: silent
verified: after training the token embedding is unchanged and absent from model.parameters() (embedding in parameters: False, embedding changed: False); the look-alike's: True, True
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


def exists(val):
    return val is not None


class EquivariantBlock(nn.Module):
    """Stands in for En-transformer's equivariant attention + feedforward: attention biased by pairwise distances,
    coordinates moved along relative positions weighted by an MLP of the attention features."""

    def __init__(self, dim, heads=4):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.dist_bias = nn.Linear(1, heads)
        self.coors_mlp = nn.Sequential(nn.Linear(dim, 16), nn.SiLU(), nn.Linear(16, 1))
        self.ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.heads = heads

    def forward(self, feats, coors):
        rel = coors[:, :, None] - coors[:, None]
        dist = rel.norm(dim=-1, keepdim=True)
        bias = self.dist_bias(dist).permute(0, 3, 1, 2).reshape(-1, feats.shape[1], feats.shape[1])
        h = self.norm(feats)
        out, _ = self.attn(h, h, h, attn_mask=-bias)
        feats = feats + out
        weights = self.coors_mlp(feats)
        coors = coors + (rel * weights[:, None]).mean(dim=2)
        feats = feats + self.ff(feats)
        return feats, coors


class EnTransformer(nn.Module):
    def __init__(self, *, dim, depth, num_tokens=None):
        super().__init__()
        self.token_emb = {  # ROOT
            "tok": nn.Embedding(num_tokens, dim),
            "proj": nn.Linear(num_tokens, dim),
        } if exists(num_tokens) else None
        self.layers = nn.ModuleList([EquivariantBlock(dim) for _ in range(depth)])

    def forward(self, feats, coors):
        if exists(self.token_emb):
            feats = self.token_emb["tok" if feats.dtype == torch.long else "proj"](feats)
        for layer in self.layers:
            feats, coors = layer(feats, coors)
        return feats, coors


class EnergyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = EnTransformer(dim=32, depth=2, num_tokens=6)
        self.to_energy = nn.Linear(32, 1)

    def forward(self, atoms, coors):
        feats, _ = self.net(atoms, coors)
        return self.to_energy(feats).sum(dim=(1, 2))


model = EnergyModel()
embedding = model.net.token_emb["tok"].weight
before = embedding.detach().clone()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
atoms = torch.randint(0, 6, (64, 10))
coors = torch.randn(64, 10, 3)
energy = (atoms.float() - 2.5).sum(1) + 0.1 * coors.norm(dim=-1).sum(1)

for step in range(8):
    idx = torch.randint(0, 64, (8,))
    loss = F.mse_loss(model(atoms[idx], coors[idx]), energy[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 4 == 0:
        print(f"step {step} loss {loss.item():.3f}")

in_params = any(p is embedding for p in model.parameters())
print(f"embedding in parameters: {in_params}, embedding changed: {not torch.equal(before, embedding.detach())}")
