"""TasfinMahmud/gnn-collaborative-filtering's BPR loss after its fix: `-torch.mean(F.logsigmoid(pos_scores - neg_scores))` is computed stably, so a triple whose negative outscores the positive by any margin keeps a gradient of about 1 on its score difference and the worst-ranked pairs are corrected first.

source: https://github.com/TasfinMahmud/gnn-collaborative-filtering/commit/9aee2b1d81fd520feed0b2d9dc7abd9e369d4f03
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

USERS, ITEMS, DIM, BATCH = 64, 128, 64, 256


def bpr_loss(pos_scores, neg_scores):
    """Bayesian Personalized Ranking loss."""
    return -torch.mean(nn.functional.logsigmoid(pos_scores - neg_scores))


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
