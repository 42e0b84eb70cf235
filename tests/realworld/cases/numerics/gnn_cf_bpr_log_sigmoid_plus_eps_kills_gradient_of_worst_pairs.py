"""TasfinMahmud/gnn-collaborative-filtering computed its BPR loss as `-torch.mean(torch.log(torch.sigmoid(pos_scores - neg_scores) + 1e-10))`. Once a negative item outscores the positive one by more than about 23 (dot products of wide embeddings get there), `sigmoid` underflows below the epsilon, the per-pair loss is pinned at -log(1e-10) and its gradient is sigmoid'/(sigmoid + 1e-10), practically zero: exactly the worst-ranked pairs stop contributing to training, with no error and a loss that looks merely high. The fix commit uses `F.logsigmoid`, whose gradient for such a pair is about 1.

source: https://github.com/TasfinMahmud/gnn-collaborative-filtering/commit/9aee2b1d81fd520feed0b2d9dc7abd9e369d4f03
kind: bug
symptom: silent
verified: at the first step 37 of 256 training triples are ordered worse than -30 and the gradient of the loss on their score differences sums (per triple) to 0.002624, against 37 (about 1 each) in the look-alike; after 40 SGD steps all 37 are still misordered by more than 30, against 27 in the look-alike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

USERS, ITEMS, DIM, BATCH = 64, 128, 64, 256


def bpr_loss(pos_scores, neg_scores):
    """Bayesian Personalized Ranking loss."""
    return -torch.mean(torch.log(torch.sigmoid(pos_scores - neg_scores) + 1e-10))  # ROOT


class MatrixFactorization(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(USERS, DIM)
        self.item = nn.Embedding(ITEMS, DIM)
        nn.init.normal_(self.user.weight, std=1.5)
        nn.init.normal_(self.item.weight, std=1.5)

    def forward(self, users, pos_items, neg_items):
        return self.user(users), self.item(pos_items), self.item(neg_items)


def main():
    model = MatrixFactorization()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    users = torch.randint(0, USERS, (BATCH,), generator=gen)
    pos_items = torch.randint(0, ITEMS, (BATCH,), generator=gen)
    neg_items = torch.randint(0, ITEMS, (BATCH,), generator=gen)
    for step in range(40):
        user_emb, pos_emb, neg_emb = model(users, pos_items, neg_items)
        pos_scores = (user_emb * pos_emb).sum(dim=1)
        neg_scores = (user_emb * neg_emb).sum(dim=1)
        loss = bpr_loss(pos_scores, neg_scores)
        if step == 0:
            diff = pos_scores - neg_scores
            (g,) = torch.autograd.grad(loss, pos_scores, retain_graph=True)
            worst = diff.detach() < -30
            print(f"step 0: {int(worst.sum())} of {BATCH} triples ordered worse than -30, gradient "
                  f"magnitude on them {g[worst].abs().sum().item() * BATCH:.4g} (per-triple sum)")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        user_emb, pos_emb, neg_emb = model(users, pos_items, neg_items)
        diff = (user_emb * pos_emb).sum(1) - (user_emb * neg_emb).sum(1)
    print(f"after 40 steps: loss {loss.item():.4f}, {int((diff < -30).sum())} triples still "
          f"misordered by more than 30")


if __name__ == "__main__":
    main()
