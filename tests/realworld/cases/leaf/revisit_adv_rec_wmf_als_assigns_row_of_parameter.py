"""revisit_adv_rec's WMFTrainer.train_als solves each user's factor in closed form and writes it back with model.P[user] = new_p_u.t(): P is an nn.Parameter (a leaf that requires grad), so the row assignment is an in-place copy into a view of a leaf and raises on the first user.

source: https://github.com/graytowne/revisit_adv_rec/issues/3
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import numpy as np
import torch
import torch.nn as nn


def _array2sparsediag(x):
    indices = np.vstack([np.arange(x.size), np.arange(x.size)])
    return torch.sparse_coo_tensor(torch.LongTensor(indices), torch.FloatTensor(x), [x.size, x.size])


class WeightedMF(nn.Module):
    def __init__(self, n_users, n_items, dim):
        super().__init__()
        self.dim = dim
        self.Q = nn.Parameter(torch.zeros([n_items, dim]).normal_(mean=0, std=0.1))
        self.P = nn.Parameter(torch.zeros([n_users, dim]).normal_(mean=0, std=0.1))

    def forward(self):
        return torch.mm(self.P, self.Q.t())


class WMFTrainer:
    def __init__(self, n_users, n_items, dim=8, l2=0.01, weight_alpha=20):
        self.net = WeightedMF(n_users, n_items, dim)
        self.dim, self.l2, self.weight_alpha = dim, l2, weight_alpha

    def train_als(self, data):
        model = self.net
        P = model.P.detach()
        Q = model.Q.detach()
        weight_alpha = self.weight_alpha - 1
        lamda_eye = torch.eye(self.dim) * self.l2
        residual = torch.mm(Q.t(), Q) + lamda_eye
        for user, batch_data in enumerate(data):
            x_u = torch.FloatTensor(batch_data).unsqueeze(1)
            cu = batch_data * weight_alpha + 1
            Cu = _array2sparsediag(cu)
            Cu_minusI = _array2sparsediag(cu - 1)
            lhs = torch.mm(Q.t(), Cu_minusI.mm(Q)) + residual
            rhs = torch.mm(Q.t(), Cu.mm(x_u))
            new_p_u = torch.mm(lhs.inverse(), rhs)
            model.P[user] = new_p_u.t()  # ROOT
        data = data.transpose()
        residual = torch.mm(P.t(), P) + lamda_eye
        for item, batch_data in enumerate(data):
            x_v = torch.FloatTensor(batch_data).unsqueeze(1)
            cv = batch_data * weight_alpha + 1
            Cv = _array2sparsediag(cv)
            Cv_minusI = _array2sparsediag(cv - 1)
            lhs = torch.mm(P.t(), Cv_minusI.mm(P)) + residual
            rhs = torch.mm(P.t(), Cv.mm(x_v))
            new_q_v = torch.mm(lhs.inverse(), rhs)
            model.Q[item] = new_q_v.t()
        return 0


torch.manual_seed(0)
rng = np.random.default_rng(0)
data = (rng.random((30, 40)) < 0.1).astype(np.float32)
trainer = WMFTrainer(n_users=30, n_items=40)
for epoch in range(3):
    trainer.train_als(data)
recon = trainer.net().detach().numpy()
print("mean score on observed", recon[data > 0].mean(), "unobserved", recon[data == 0].mean())
