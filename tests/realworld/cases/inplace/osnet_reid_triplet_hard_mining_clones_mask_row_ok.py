"""osnet-reid-pytorch's batch-hard `TripletLoss` after its fix: `pos_mask = mask[i].clone()` gives each anchor its own copy of its mask row, so excluding the anchor from its positives leaves the shared identity mask (saved by the boolean indexing for backward) untouched, no anchor is its own negative, and the training loop's backward runs.

source: https://github.com/seagochen/osnet-reid-pytorch/commit/1a40414744c5d5c270ffae0c3aa00511397cfc4e
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

P, K, DIM_IN, DIM = 4, 4, 16, 8


class TripletLoss(nn.Module):
    def __init__(self, margin=0.3):
        super().__init__()
        self.ranking_loss = nn.MarginRankingLoss(margin=margin)

    def forward(self, inputs, targets):
        n = inputs.size(0)
        dist = inputs.pow(2).sum(dim=1, keepdim=True).expand(n, n)
        dist = dist + dist.t()
        dist = dist.addmm(inputs, inputs.t(), beta=1, alpha=-2).clamp(min=1e-12).sqrt()
        mask = targets.expand(n, n).eq(targets.expand(n, n).t())
        dist_ap, dist_an, self_negatives = [], [], 0
        for i in range(n):
            pos_mask = mask[i].clone()
            pos_mask[i] = False
            dist_ap.append(dist[i][pos_mask].max().unsqueeze(0))
            neg_mask = ~mask[i]
            self_negatives += int(neg_mask[i])
            dist_an.append(dist[i][neg_mask].min().unsqueeze(0))
        dist_ap, dist_an = torch.cat(dist_ap), torch.cat(dist_an)
        self.self_negatives = self_negatives
        return self.ranking_loss(dist_an, dist_ap, torch.ones_like(dist_an))


def pairwise_gap(embed, x, ids):
    with torch.no_grad():
        f = embed(x)
        d = torch.cdist(f, f)
        same = ids[:, None] == ids[None, :]
        off_diag = ~torch.eye(len(ids), dtype=torch.bool)
        return (d[~same].mean() - d[same & off_diag].mean()).item()


centers = torch.randn(P, DIM_IN)
ids = torch.arange(P).repeat_interleave(K)
x = centers[ids] + 1.5 * torch.randn(P * K, DIM_IN)
embed = nn.Sequential(nn.Linear(DIM_IN, 32), nn.ReLU(), nn.Linear(32, DIM))
criterion = TripletLoss()
opt = torch.optim.SGD(embed.parameters(), lr=0.05)
gap_before = pairwise_gap(embed, x, ids)
for step in range(100):
    loss = criterion(embed(x), ids)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"anchors whose hardest negative is themselves: {criterion.self_negatives}/{P * K}")
print(f"negative-minus-positive distance gap: {gap_before:.3f} before, {pairwise_gap(embed, x, ids):.3f} after")
