"""sentence-transformers' pairwise_euclidean_sim after the pull request: the distance is torch.linalg.vector_norm(a - b, dim=-1), whose backward gives a zero subgradient at zero distance, so a duplicate anchor/positive pair leaves the TripletLoss gradients finite.

source: https://github.com/huggingface/sentence-transformers/pull/4033
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def pairwise_euclidean_sim(a, b):
    return -torch.linalg.vector_norm(a - b, dim=-1)


class TripletLoss(nn.Module):
    def __init__(self, model, triplet_margin=5.0):
        super().__init__()
        self.model, self.triplet_margin = model, triplet_margin

    def distance_metric(self, x, y):
        return -pairwise_euclidean_sim(x, y)

    def forward(self, anchor, positive, negative):
        rep_anchor, rep_pos, rep_neg = self.model(anchor), self.model(positive), self.model(negative)
        distance_pos = self.distance_metric(rep_anchor, rep_pos)
        distance_neg = self.distance_metric(rep_anchor, rep_neg)
        return F.relu(distance_pos - distance_neg + self.triplet_margin).mean()


torch.manual_seed(0)
encoder = nn.Sequential(nn.EmbeddingBag(64, 32), nn.Linear(32, 16))
loss_fn = TripletLoss(encoder)
optimizer = torch.optim.AdamW(encoder.parameters(), lr=2e-5)
anchor = torch.randint(0, 64, (8, 6))
positive = torch.randint(0, 64, (8, 6))
positive[3] = anchor[3]
negative = torch.randint(0, 64, (8, 6))
loss = loss_fn(anchor, positive, negative)
optimizer.zero_grad()
loss.backward()
grad = encoder[1].weight.grad
print(loss.item(), int(torch.isnan(grad).sum()), grad.numel())
optimizer.step()
print(bool(torch.isnan(encoder[1].weight).all()))
