"""pytorch-protonets' `train_epoch` after its fix: `optimizer.zero_grad()` runs at the top of every episode, so the gradient Adam steps with is exactly the current episode's gradient.

source: https://github.com/d6ms/pytorch-protonets/commit/3c18dd7010142faa985d1e762ca7eb500396f81c
kind: lookalike
"""
import torch
from torch import nn
from torch.optim import Adam
from torch.optim.lr_scheduler import StepLR

torch.manual_seed(0)
torch.set_num_threads(1)

N_CLASSES, DIM = 40, 16
CLASS_MEANS = torch.randn(N_CLASSES, DIM) * 2


def protonet_embedding_model():
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32))


def episodes(count, n, k, q):
    for _ in range(count):
        classes = torch.randperm(N_CLASSES)[:k]
        x = CLASS_MEANS[classes].repeat_interleave(n + q, dim=0) + torch.randn(k * (n + q), DIM)
        x = x.reshape(k, n + q, DIM)
        support, query = x[:, :n].reshape(-1, DIM), x[:, n:].reshape(-1, DIM)
        yield torch.cat([support, query]), torch.arange(k).repeat_interleave(q)


def predict(model, n, k, q, x, y, loss_fn):
    embeddings = model(x)
    supports, queries = embeddings[:n * k], embeddings[n * k:]
    prototypes = supports.reshape(k, n, -1).mean(dim=1)
    distances = torch.cdist(queries, prototypes) ** 2
    log_p_y = (-distances).log_softmax(dim=1)
    return log_p_y, loss_fn(log_p_y, y)


def train_epoch(model, optimizer, scheduler, loss_fn, dataloader, n, k, q, epoch_idx, probe):
    model.train()
    for i, (x, y) in enumerate(dataloader, 1):
        optimizer.zero_grad()
        y_pred, loss = predict(model, n, k, q, x, y, loss_fn)
        own = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)  # read-only probe
        loss.backward()
        probe(i, own, [p.grad for p in model.parameters()])
        optimizer.step()
        scheduler.step()


def probe(i, own, used):
    if i == 20:
        own_v = torch.cat([g.flatten() for g in own])
        used_v = torch.cat([g.flatten() for g in used])
        cos = torch.nn.functional.cosine_similarity(own_v, used_v, dim=0).item()
        print(f"episode {i}: gradient given to Adam has norm {used_v.norm():.3g}, the episode's own gradient {own_v.norm():.3g} "
              f"(ratio {used_v.norm() / own_v.norm():.3g}, cosine {cos:.2f})")


model = protonet_embedding_model()
optimizer = Adam(model.parameters(), lr=1e-3)
scheduler = StepLR(optimizer, step_size=20, gamma=0.5)
loss_fn = nn.NLLLoss()
n, k, q = 1, 5, 5
train_epoch(model, optimizer, scheduler, loss_fn, episodes(30, n, k, q), n, k, q, 1, probe)
