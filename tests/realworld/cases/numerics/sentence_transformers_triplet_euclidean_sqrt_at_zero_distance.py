"""sentence-transformers' pairwise_euclidean_sim computes -torch.sqrt(torch.sum((a - b) ** 2, dim=-1)); when TripletLoss meets an anchor and a positive with identical embeddings (duplicate sentences) the distance is exactly 0, the square root's derivative is infinite and the gradient turns to NaN even though that triplet's loss is 0, so the optimizer writes NaN into the encoder.

source: https://github.com/huggingface/sentence-transformers/pull/4033
kind: bug
symptom: silent
verified: with one duplicate anchor/positive pair in a batch of 8 the loss is a finite 4.707, but the linear layer's weight gradient is NaN in all 512 entries (and 192 entries of the embedding's) and after one AdamW step every linear weight is NaN; with torch.linalg.vector_norm (the pull request) the loss is the same 4.707, the gradient is finite (norm 1.34) and the weights stay finite
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def pairwise_euclidean_sim(a, b):
    return -torch.sqrt(torch.sum((a - b) ** 2, dim=-1))  # ROOT


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
