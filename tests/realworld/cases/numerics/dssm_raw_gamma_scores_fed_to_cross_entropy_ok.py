"""DSSM returns the gamma-scaled cosine scores as logits and lets CrossEntropyLoss apply the softmax.

source: https://github.com/nishnik/Deep-Semantic-Similarity-Model-PyTorch/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

WORD_DEPTH, K, L, J = 30, 32, 16, 4


class CDSSM(nn.Module):
    def __init__(self):
        super(CDSSM, self).__init__()
        self.query_sem = nn.Sequential(nn.Linear(WORD_DEPTH, K), nn.Tanh(), nn.Linear(K, L), nn.Tanh())
        self.doc_sem = nn.Sequential(nn.Linear(WORD_DEPTH, K), nn.Tanh(), nn.Linear(K, L), nn.Tanh())
        self.learn_gamma = nn.Linear(1, 1, bias=False)

    def forward(self, q, pos, negs):
        q_s = self.query_sem(q)
        docs = torch.cat([pos.unsqueeze(1), negs], dim=1)
        d_s = self.doc_sem(docs)
        dots = F.cosine_similarity(q_s.unsqueeze(1), d_s, dim=-1)
        with_gammas = self.learn_gamma(dots.unsqueeze(-1)).squeeze(-1)
        return with_gammas


torch.manual_seed(0)
model = CDSSM()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
q, pos, negs = torch.randn(16, WORD_DEPTH), torch.randn(16, WORD_DEPTH), torch.randn(16, J, WORD_DEPTH)
y = torch.zeros(16, dtype=torch.long)
for step in range(300):
    y_pred = model(q, pos, negs)
    loss = criterion(y_pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
