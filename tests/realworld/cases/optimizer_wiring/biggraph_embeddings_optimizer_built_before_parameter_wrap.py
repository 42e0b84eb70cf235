"""PyTorch-BigGraph's `load_embeddings` builds the embedding table's optimizer on the plain shared tensor `embs` and only then wraps it as `torch.nn.Parameter(embs)` for the model: the Parameter is a new tensor (same storage), its `.grad` is where the backward writes, and the Adagrad that the trainer steps holds the old tensor, whose `.grad` stays None; the embeddings never learn while the relation operator does.

source: https://github.com/facebookresearch/PyTorch-BigGraph/commit/fc6140865be79771b874e84ecf5736c962ee480c
kind: bug
symptom: silent
verified: after 20 training steps the relation operator moved but the entity embedding table is bit-for-bit its initial value (the optimizer's tensor has grad None)
"""
from typing import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adagrad, Optimizer

torch.manual_seed(0)
NUM_ENTITIES, DIMENSION, LR = 50, 8, 0.1


def init_embs(count: int, dimension: int, init_scale: float):
    embs = torch.randn(count, dimension) * init_scale
    embs.share_memory_()
    return embs, None


def make_optimizer(params: Iterable[torch.nn.Parameter], is_emb: bool) -> Optimizer:
    optimizer = Adagrad(list(params), lr=LR)
    optimizer.share_memory()
    return optimizer


def load_embeddings(entity: str, count: int):
    embs, optim_state = init_embs(count, DIMENSION, 0.1)
    assert embs.is_shared()
    optimizer = make_optimizer([embs], True)  # ROOT
    if optim_state is not None:
        optimizer.load_state_dict(optim_state)
    return torch.nn.Parameter(embs), optimizer


class MultiRelationEmbedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rel_operator = nn.Linear(DIMENSION, DIMENSION, bias=False)

    def forward(self, lhs_embs, rhs_embs, neg_embs):
        lhs = self.rel_operator(lhs_embs)
        pos = (lhs * rhs_embs).sum(-1)
        neg = lhs @ neg_embs.t()
        return F.relu(1.0 - pos[:, None] + neg).sum()  # ranking loss, margin 1


model = MultiRelationEmbedder()
model_optimizer = make_optimizer(model.parameters(), False)
embs, emb_optimizer = load_embeddings("user", NUM_ENTITIES)
initial_embs, initial_op = embs.detach().clone(), model.rel_operator.weight.detach().clone()

for step in range(20):
    edges = torch.randint(0, NUM_ENTITIES, (16, 2))
    negs = torch.randint(0, NUM_ENTITIES, (10,))
    loss = model(embs[edges[:, 0]], embs[edges[:, 1]], embs[negs])
    model_optimizer.zero_grad()
    emb_optimizer.zero_grad()
    loss.backward()
    model_optimizer.step()
    emb_optimizer.step()

print(f"loss {loss.item():.3f}; relation operator moved {(model.rel_operator.weight - initial_op).abs().max().item():.4f}; "
      f"embeddings moved {(embs.detach() - initial_embs).abs().max().item():.4f}; "
      f"optimizer's tensor grad is None: {emb_optimizer.param_groups[0]['params'][0].grad is None}")
