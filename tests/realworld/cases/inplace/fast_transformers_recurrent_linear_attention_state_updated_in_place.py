"""fast-transformers' `RecurrentLinearAttention` keeps the causal linear-attention state `[Si, Zi]` as memory and updates it with `Zi += K` and `Si += einsum(K, value)`: the state tensors returned at step t were already saved by step t's einsums for backward, so when the model is trained by unrolling the recurrent form over a sequence, step t+1's in-place update invalidates them and `loss.backward()` fails.

source: https://github.com/idiap/fast-transformers/commit/2984f4444467314e514c4af36fbedd3804027504
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


def elu_feature_map(x):
    return F.elu(x) + 1


class RecurrentLinearAttention(nn.Module):
    """Causal linear attention in its recurrent form: one query/key/value per call, the running sums as memory."""

    def __init__(self, feature_map=None, eps=1e-6):
        super().__init__()
        self.feature_map = feature_map or elu_feature_map
        self.eps = eps

    def forward(self, query, key, value, memory=None):
        Q = self.feature_map(query)
        K = self.feature_map(key)
        N, H, D = Q.shape
        _, _, M = value.shape
        if memory is None:
            Si = query.new_zeros((N, H, D, M))
            Zi = query.new_zeros((N, H, D))
        else:
            Si, Zi = memory
        if len(Si) != N:
            raise ValueError("The batch size changed during iteration")
        Zi += K  # ROOT
        Si += torch.einsum("nhd,nhm->nhdm", K, value)
        Z = 1. / (torch.einsum("nhd,nhd->nh", Q, Zi) + self.eps)
        V = torch.einsum("nhd,nhdm,nh->nhm", Q, Si, Z)
        return V, [Si, Zi]


class RecurrentLM(nn.Module):
    """One recurrent linear-attention layer between an embedding and a vocabulary head."""

    def __init__(self, vocab=20, heads=2, dim=8):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.embed = nn.Embedding(vocab, heads * dim)
        self.q = nn.Linear(heads * dim, heads * dim)
        self.k = nn.Linear(heads * dim, heads * dim)
        self.v = nn.Linear(heads * dim, heads * dim)
        self.attention = RecurrentLinearAttention()
        self.out = nn.Linear(heads * dim, vocab)

    def forward(self, token, memory=None):
        h = self.embed(token)
        shape = (-1, self.heads, self.dim)
        v, memory = self.attention(self.q(h).view(shape), self.k(h).view(shape), self.v(h).view(shape), memory)
        return self.out(v.reshape(len(token), -1) + h), memory


model = RecurrentLM()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
data = torch.randint(0, 20, (16, 12))

for epoch in range(3):
    optimizer.zero_grad()
    memory = None
    loss = 0.0
    for t in range(data.shape[1] - 1):
        logits, memory = model(data[:, t], memory)
        loss = loss + F.cross_entropy(logits, data[:, t + 1])
    loss = loss / (data.shape[1] - 1)
    loss.backward()
    optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
