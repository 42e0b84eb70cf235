"""nerf_pl's NeRF-W system creates the per-image appearance and transient embeddings (`embedding_a`, `embedding_t`) next to the NeRF models and feeds them to the fine model in `forward`, but `configure_optimizers` builds the optimizer from `self.models` only; the embeddings get gradients every step and are never updated, with no error.

source: https://github.com/kwea123/nerf_pl/commit/f121fc135dbc75d4edccedfb7d08b58a64fc8c88
kind: bug
symptom: silent
verified: after 50 training steps `embedding_a.weight` and `embedding_t.weight` carry gradients (accumulating, as `zero_grad` never reaches them) but are bit-identical to their initial values (max abs change 0.0) while the fine NeRF weights move (0.27); in the look-alike (`models_to_train` with both embeddings) the embeddings move too (max abs change 0.28)
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
from torch.optim import Adam


class PosEmbedding(nn.Module):
    def __init__(self, max_logscale, N_freqs):
        super().__init__()
        self.funcs = [torch.sin, torch.cos]
        self.freqs = 2 ** torch.linspace(0, max_logscale, N_freqs)

    def forward(self, x):
        out = [x]
        for freq in self.freqs:
            for func in self.funcs:
                out += [func(freq * x)]
        return torch.cat(out, -1)


class NeRF(nn.Module):
    def __init__(self, typ, in_channels_xyz, encode_appearance=False, in_channels_a=0,
                 encode_transient=False, in_channels_t=0, W=32):
        super().__init__()
        self.typ = typ
        self.encode_appearance = encode_appearance
        self.encode_transient = encode_transient
        self.xyz = nn.Sequential(nn.Linear(in_channels_xyz, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU())
        self.sigma = nn.Linear(W, 1)
        in_rgb = W + (in_channels_a if encode_appearance else 0)
        self.static_rgb = nn.Sequential(nn.Linear(in_rgb, W // 2), nn.ReLU(), nn.Linear(W // 2, 3), nn.Sigmoid())
        if encode_transient:
            self.transient = nn.Sequential(nn.Linear(W + in_channels_t, W // 2), nn.ReLU(), nn.Linear(W // 2, 4))

    def forward(self, x, a=None, t=None):
        h = self.xyz(x)
        rgb = self.static_rgb(torch.cat([h, a], -1) if self.encode_appearance else h)
        if self.encode_transient:
            tr = self.transient(torch.cat([h, t], -1))
            rgb = rgb + 0.1 * torch.sigmoid(tr[:, :3])
        return rgb


def get_parameters(models):
    """Get all model parameters recursively."""
    parameters = []
    if isinstance(models, list):
        for model in models:
            parameters += get_parameters(model)
    elif isinstance(models, dict):
        for model in models.values():
            parameters += get_parameters(model)
    else:
        parameters += list(models.parameters())
    return parameters


def get_optimizer(hparams, models):
    parameters = get_parameters(models)
    return Adam(parameters, lr=hparams.lr, eps=1e-8, weight_decay=hparams.weight_decay)


class NeRFSystem(nn.Module):
    def __init__(self, hparams):
        super().__init__()
        self.hparams = hparams
        self.loss = nn.MSELoss()
        self.embedding_xyz = PosEmbedding(hparams.N_emb_xyz - 1, hparams.N_emb_xyz)
        self.embeddings = {'xyz': self.embedding_xyz}
        if hparams.encode_a:
            self.embedding_a = torch.nn.Embedding(hparams.N_vocab, hparams.N_a)
            self.embeddings['a'] = self.embedding_a
        if hparams.encode_t:
            self.embedding_t = torch.nn.Embedding(hparams.N_vocab, hparams.N_tau)
            self.embeddings['t'] = self.embedding_t
        self.nerf_coarse = NeRF('coarse', in_channels_xyz=6 * hparams.N_emb_xyz + 3)
        self.models = {'coarse': self.nerf_coarse}
        self.nerf_fine = NeRF('fine', in_channels_xyz=6 * hparams.N_emb_xyz + 3,
                              encode_appearance=hparams.encode_a, in_channels_a=hparams.N_a,
                              encode_transient=hparams.encode_t, in_channels_t=hparams.N_tau)
        self.models['fine'] = self.nerf_fine

    def forward(self, rays, ts):
        xyz = self.embeddings['xyz'](rays)
        a = self.embeddings['a'](ts)
        t = self.embeddings['t'](ts)
        return {'rgb_coarse': self.models['coarse'](xyz), 'rgb_fine': self.models['fine'](xyz, a, t)}

    def configure_optimizers(self):
        self.optimizer = get_optimizer(self.hparams, self.models)  # ROOT
        return self.optimizer

    def training_step(self, batch):
        rays, rgbs, ts = batch['rays'], batch['rgbs'], batch['ts']
        results = self(rays, ts)
        return self.loss(results['rgb_coarse'], rgbs) + self.loss(results['rgb_fine'], rgbs)


torch.manual_seed(0)
hparams = SimpleNamespace(N_emb_xyz=4, encode_a=True, encode_t=True, N_vocab=8, N_a=6, N_tau=4,
                          lr=5e-3, weight_decay=0.0)
system = NeRFSystem(hparams)
optimizer = system.configure_optimizers()
emb_before = system.embedding_a.weight.detach().clone(), system.embedding_t.weight.detach().clone()
fine_before = system.nerf_fine.static_rgb[0].weight.detach().clone()
for step in range(50):
    ts = torch.randint(0, 8, (64,))
    rays = torch.rand(64, 3)
    rgbs = torch.sigmoid(rays * (ts[:, None].float() - 4.0))
    loss = system.training_step({'rays': rays, 'rgbs': rgbs, 'ts': ts})
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
emb_change = max((system.embedding_a.weight - emb_before[0]).abs().max().item(),
                 (system.embedding_t.weight - emb_before[1]).abs().max().item())
fine_change = (system.nerf_fine.static_rgb[0].weight - fine_before).abs().max().item()
print("embedding grad norm: %.4f" % system.embedding_a.weight.grad.norm().item())
print("embedding change: %.4f  fine NeRF change: %.4f" % (emb_change, fine_change))
