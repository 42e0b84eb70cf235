"""LightGlue TokenConfidence: the token head ends with a Sigmoid and the loss is BCEWithLogitsLoss, but the loss calls self.token[0], the Linear alone, so it sees logits.

source: https://github.com/cvg/glue-factory/issues/89
kind: lookalike
verified: the loss (0.71) is computed on the Linear's logits and forward() returns probabilities in (0, 1)
"""
import torch
import torch.nn as nn


class TokenConfidence(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.token = nn.Sequential(nn.Linear(dim, 1), nn.Sigmoid())
        self.loss_fn = nn.BCEWithLogitsLoss(reduction="none")

    def forward(self, desc0, desc1):
        return self.token(desc0.detach()).squeeze(-1), self.token(desc1.detach()).squeeze(-1)

    def loss(self, desc0, desc1, la_now, la_final):
        logit0 = self.token[0](desc0.detach()).squeeze(-1)
        logit1 = self.token[0](desc1.detach()).squeeze(-1)
        la_now, la_final = la_now.detach(), la_final.detach()
        correct0 = la_final[:, :-1, :].max(-1).indices == la_now[:, :-1, :].max(-1).indices
        correct1 = la_final[:, :, :-1].max(-2).indices == la_now[:, :, :-1].max(-2).indices
        return (self.loss_fn(logit0, correct0.float()).mean(-1) + self.loss_fn(logit1, correct1.float()).mean(-1)) / 2.0


torch.manual_seed(0)
conf = TokenConfidence(16)
optimizer = torch.optim.Adam(conf.parameters(), lr=1e-3)
desc0, desc1 = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
la_now, la_final = torch.randn(2, 6, 7).softmax(-1), torch.randn(2, 6, 7).softmax(-1)
loss = conf.loss(desc0, desc1, la_now, la_final).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
p0, p1 = conf(desc0, desc1)
print(loss.item(), bool(((p0 > 0) & (p0 < 1)).all()))
