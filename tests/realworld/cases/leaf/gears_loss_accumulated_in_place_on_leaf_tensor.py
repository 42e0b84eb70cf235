"""GEARS' `loss_fct` starts the per-perturbation sum from `torch.tensor(0.0, requires_grad=True).to(pred.device)` and adds each perturbation's autofocus and direction losses with `losses += ...`; on a CPU run `.to(device)` returns the same tensor, a leaf that requires grad, so the first in-place add fails (on CUDA the `.to` made a non-leaf copy and it trained).

source: https://github.com/snap-stanford/GEARS/commit/2f495e5616b3bd3430bf7067e58847ba7d461f8a
kind: bug
symptom: crash
verified: a leaf Variable that requires grad is being used in an in-place operation
"""
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
N_GENES = 20


def loss_fct(pred, y, perts, ctrl=None, direction_lambda=1e-3, dict_filter=None):
    gamma = 2
    perts = np.array(perts)
    losses = torch.tensor(0.0, requires_grad=True).to(pred.device)

    for p in set(perts):
        pert_idx = np.where(perts == p)[0]
        # during training, the all-zero genes are removed from the loss of a perturbation
        if p != 'ctrl':
            retain_idx = dict_filter[p]
            pred_p = pred[pert_idx][:, retain_idx]
            y_p = y[pert_idx][:, retain_idx]
        else:
            pred_p = pred[pert_idx]
            y_p = y[pert_idx]
        losses += torch.sum((pred_p - y_p) ** (2 + gamma)) / pred_p.shape[0] / pred_p.shape[1]  # ROOT

        # direction loss
        if p != 'ctrl':
            losses += torch.sum(direction_lambda *
                                (torch.sign(y_p - ctrl[retain_idx]) -
                                 torch.sign(pred_p - ctrl[retain_idx])) ** 2) / \
                pred_p.shape[0] / pred_p.shape[1]
        else:
            losses += torch.sum(direction_lambda * (torch.sign(y_p - ctrl) -
                                                    torch.sign(pred_p - ctrl)) ** 2) / \
                pred_p.shape[0] / pred_p.shape[1]
    return losses / (len(set(perts)))


class GEARSLike(nn.Module):
    """Stands in for GEARS_Model: a gene embedding plus a perturbation embedding, predicting the expression shift."""

    def __init__(self, n_genes, n_perts, hidden=16):
        super().__init__()
        self.pert_emb = nn.Embedding(n_perts, hidden)
        self.gene_mlp = nn.Sequential(nn.Linear(n_genes, hidden), nn.ReLU())
        self.out = nn.Linear(hidden, n_genes)

    def forward(self, x, pert_ids):
        return x + self.out(self.gene_mlp(x) + self.pert_emb(pert_ids))


pert_names = ['ctrl', 'FOSB+ctrl', 'CEBPE+ctrl']
dict_filter = {'FOSB+ctrl': np.arange(0, 15), 'CEBPE+ctrl': np.arange(5, 20)}
ctrl = torch.rand(N_GENES)
device = torch.device("cpu")
model = GEARSLike(N_GENES, len(pert_names)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=5e-4)

for step in range(3):
    pert_ids = torch.randint(0, len(pert_names), (12,))
    perts = [pert_names[i] for i in pert_ids]
    x = ctrl + 0.1 * torch.randn(12, N_GENES)
    y = x + 0.5 * torch.randn(12, N_GENES)
    model.train()
    optimizer.zero_grad()
    pred = model(x.to(device), pert_ids.to(device))
    loss = loss_fct(pred, y, perts, ctrl, dict_filter=dict_filter)
    loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), clip_value=1.0)
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
