"""A free-form flow is trained with the `fff_loss` from the FFF repository copied into a project whose trainer evaluates every validation batch inside `torch.no_grad()`; the loss's maximum-likelihood surrogate needs a vector-Jacobian product of the encoder (`grad(z, x, v, create_graph=True)`), and with gradients switched off by the validation loop `z` has no graph, so the first validation epoch stops with an autograd error.

source: https://github.com/vislearn/FFF/issues/5
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
from torch.autograd import grad
from torch.autograd.forward_ad import dual_level, make_dual, unpack_dual


def sum_except_batch(x):
    return x.reshape(x.shape[0], -1).sum(-1)


def nll_surrogate(x, encode, decode):
    x.requires_grad_()
    z = encode(x)
    v = torch.randn_like(z)
    # g'(z) v via forward-mode AD
    with dual_level():
        dual_z = make_dual(z, v)
        dual_x1 = decode(dual_z)
        x1, v1 = unpack_dual(dual_x1)
    # v^T f'(x) via backward-mode AD
    v2, = grad(z, x, v, create_graph=True)  # SYMPTOM
    surrogate = sum_except_batch(v2 * v1.detach())
    return z, x1, surrogate


def fff_loss(x, encode, decode, beta):
    z, x1, surrogate = nll_surrogate(x, encode, decode)
    log_prob = -0.5 * sum_except_batch(z ** 2)
    nll = -log_prob - surrogate
    reconstruction = sum_except_batch((x - x1) ** 2)
    return (nll + beta * reconstruction).mean()


class FreeFormFlow(nn.Module):
    def __init__(self, dim=2, hidden=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, dim))
        self.decoder = nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, dim))

    def compute_loss(self, batch):
        return fff_loss(batch, self.encoder, self.decoder, beta=10.0)


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def train_epoch(self, batches):
        self.model.train()
        for batch in batches:
            loss = self.model.compute_loss(batch)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def validate(self, batches):
        self.model.eval()
        with torch.no_grad():  # ROOT
            losses = [self.model.compute_loss(batch).item() for batch in batches]
        return sum(losses) / len(losses)


torch.manual_seed(0)
data = torch.randn(512, 2) @ torch.tensor([[1.0, 0.8], [0.0, 0.6]])
train_batches = list(data[:448].split(64))
val_batches = list(data[448:].split(64))
trainer = Trainer(FreeFormFlow())
for epoch in range(3):
    train_loss = trainer.train_epoch(train_batches)
    val_loss = trainer.validate(val_batches)
    print("epoch %d train %.3f val %.3f" % (epoch, train_loss, val_loss))
