"""data2vec-pytorch's EMA teacher keeps `self.model = model`, the very encoder the Data2Vec student trains, and then calls `self.model.requires_grad_(False)` on it; the student encoder is frozen from construction on, so `TextTrainer.train_step`'s `backward()` only reaches the regression head and the encoder never learns, with no error.

source: https://github.com/arxyzan/data2vec-pytorch/issues/8
kind: bug
symptom: silent
verified: after 20 `train_step` calls every encoder parameter still has `requires_grad` False and `grad` None; the encoder only drifts through the EMA step averaging it with itself (max abs change 0.0001) while the regression head trains; in the look-alike (`copy.deepcopy(model)`) the encoder gets gradients and moves (max abs change 0.018)
"""
import copy
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class EMA:
    """Modified version of class fairseq.models.ema.EMAModule."""

    def __init__(self, model: nn.Module, cfg, device=None, skip_keys=None):
        self.model = model
        self.model.requires_grad_(False)  # ROOT
        self.model.to(device)
        self.cfg = cfg
        self.device = device
        self.skip_keys = skip_keys or set()
        self.decay = self.cfg.model.ema_decay
        self.num_updates = 0

    def step(self, new_model: nn.Module):
        ema_state_dict = {}
        ema_params = self.model.state_dict()
        for key, param in new_model.state_dict().items():
            ema_param = ema_params[key].float()
            if key in self.skip_keys:
                ema_param = param.to(dtype=ema_param.dtype).clone()
            else:
                ema_param.mul_(self.decay)
                ema_param.add_(param.to(dtype=ema_param.dtype), alpha=1 - self.decay)
            ema_state_dict[key] = ema_param
        self.model.load_state_dict(ema_state_dict, strict=False)
        self.num_updates += 1


class Encoder(nn.Module):
    def __init__(self, vocab=100, dim=16, layers=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mask_emb = nn.Parameter(torch.zeros(dim).uniform_())
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))

    def forward(self, src, mask=None):
        x = self.embed(src)
        if mask is not None:
            x = torch.where(mask.unsqueeze(-1), self.mask_emb.expand_as(x), x)
        states = []
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
            states.append(x)
        return {'encoder_out': x, 'encoder_states': states}


class Data2Vec(nn.Module):
    def __init__(self, encoder, cfg):
        super().__init__()
        self.embed_dim = cfg.model.embed_dim
        self.encoder = encoder
        self.cfg = cfg
        self.ema = EMA(self.encoder, cfg)  # EMA acts as the teacher
        self.regression_head = nn.Sequential(nn.Linear(self.embed_dim, self.embed_dim * 2), nn.GELU(),
                                             nn.Linear(self.embed_dim * 2, self.embed_dim))

    def ema_step(self):
        if self.ema.decay < 1:
            self.ema.step(self.encoder)

    def forward(self, src, trg=None, mask=None):
        x = self.encoder(src, mask)['encoder_out']
        if trg is None:
            return x
        with torch.no_grad():
            self.ema.model.eval()
            y = self.ema.model(trg, None)['encoder_states']
            y = y[-self.cfg.model.average_top_k_layers:]
            y = [F.layer_norm(tl.float(), tl.shape[-1:]) for tl in y]
            y = sum(y) / len(y)
        x = x[mask]
        y = y[mask]
        x = self.regression_head(x)
        return x, y


class TextTrainer:
    def __init__(self, cfg):
        self.cfg = cfg
        self.encoder = Encoder(dim=cfg.model.embed_dim)
        self.model = Data2Vec(encoder=self.encoder, cfg=cfg)
        self.optimizer = optim.Adam(self.model.parameters(), cfg.optimizer.lr)
        self.criterion = nn.SmoothL1Loss(reduction='none', beta=cfg.criterion.loss_beta)

    def train_step(self, batch):
        src, trg, mask = batch
        self.model.train()
        x, y = self.model(src, trg, mask)
        loss = self.criterion(x.float(), y.float()).sum(dim=-1).sum().div(x.size(0))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.model.ema_step()
        return loss.item()


torch.manual_seed(0)
cfg = SimpleNamespace(model=SimpleNamespace(embed_dim=16, ema_decay=0.999, average_top_k_layers=2),
                      optimizer=SimpleNamespace(lr=1e-3), criterion=SimpleNamespace(loss_beta=4.0))
trainer = TextTrainer(cfg)
before = {n: p.detach().clone() for n, p in trainer.encoder.named_parameters()}
for _ in range(20):
    trg = torch.randint(0, 100, (8, 12))
    mask = torch.rand(8, 12) < 0.3
    trainer.train_step((trg, trg, mask))
change = max((p.detach() - before[n]).abs().max().item() for n, p in trainer.encoder.named_parameters())
print("encoder max change: %.4f" % change)
