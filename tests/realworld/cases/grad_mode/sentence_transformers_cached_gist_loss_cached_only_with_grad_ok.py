"""CachedGISTEmbedLoss as fixed in PR 2668: it caches gradients (loss.backward() inside forward) only when grad mode is enabled, and just computes the loss during a torch.no_grad() evaluation.

source: https://github.com/huggingface/sentence-transformers/pull/2668
kind: lookalike
verified: runs; one training step and one evaluation
"""
from contextlib import nullcontext
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


def _backward_hook(grad_output, sentence_features, loss_obj):
    with torch.enable_grad():
        for sentence_feature, grad in zip(sentence_features, loss_obj.cache):
            for begin, grad_mb in zip(range(0, len(sentence_feature), loss_obj.mini_batch_size), grad):
                reps_mb, _ = loss_obj.embed_minibatch(sentence_feature, begin, begin + loss_obj.mini_batch_size,
                                                      with_grad=True)
                surrogate = torch.dot(reps_mb.flatten(), grad_mb.flatten()) * grad_output
                surrogate.backward()


class CachedGISTEmbedLoss(nn.Module):
    def __init__(self, model, guide, temperature=0.01, mini_batch_size=4):
        super().__init__()
        self.model = model
        self.guide = guide
        self.temperature = temperature
        self.mini_batch_size = mini_batch_size
        self.cache = None

    def embed_minibatch(self, sentence_feature, begin, end, with_grad):
        grad_context = nullcontext if with_grad else torch.no_grad
        with grad_context():
            reps = F.normalize(self.model(sentence_feature[begin:end]), dim=-1)
        with torch.no_grad():
            reps_guided = F.normalize(self.guide(sentence_feature[begin:end]), dim=-1)
        return reps, reps_guided

    def calculate_loss(self, reps, reps_guided):
        anchor, positive = torch.cat(reps[0]), torch.cat(reps[1])
        anchor_guide, positive_guide = torch.cat(reps_guided[0]), torch.cat(reps_guided[1])
        guided_ap_sim = anchor_guide @ positive_guide.T
        guided_sim = guided_ap_sim.diagonal().view(-1, 1)
        ap_sim = anchor @ positive.T
        ap_sim = ap_sim.masked_fill(guided_ap_sim > guided_sim, -torch.inf)
        ap_sim = ap_sim.masked_fill(torch.eye(len(anchor), dtype=torch.bool), (anchor * positive).sum(-1).min())
        labels = torch.arange(len(anchor))
        return F.cross_entropy(ap_sim / self.temperature, labels)

    def calculate_loss_and_cache_gradients(self, reps, reps_guided):
        loss = self.calculate_loss(reps, reps_guided)
        loss.backward()
        loss = loss.detach().requires_grad_()
        self.cache = [[r.grad for r in rs] for rs in reps]
        return loss

    def forward(self, sentence_features, labels=None):
        reps, reps_guided = [], []
        for sentence_feature in sentence_features:
            reps_mbs, reps_guided_mbs = [], []
            for begin in range(0, len(sentence_feature), self.mini_batch_size):
                reps_mb, reps_guided_mb = self.embed_minibatch(sentence_feature, begin, begin + self.mini_batch_size,
                                                               with_grad=False)
                reps_mbs.append(reps_mb.detach().requires_grad_())
                reps_guided_mbs.append(reps_guided_mb)
            reps.append(reps_mbs)
            reps_guided.append(reps_guided_mbs)
        if torch.is_grad_enabled():
            loss = self.calculate_loss_and_cache_gradients(reps, reps_guided)
            loss.register_hook(partial(_backward_hook, sentence_features=sentence_features, loss_obj=self))
        else:
            loss = self.calculate_loss(reps, reps_guided)
        return loss


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
guide = nn.Linear(16, 8)
loss_fn = CachedGISTEmbedLoss(model, guide)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
anchors, positives = torch.randn(8, 16), torch.randn(8, 16)
loss = loss_fn([anchors, positives])
loss.backward()
assert model[0].weight.grad is not None and model[0].weight.grad.abs().sum() > 0
optimizer.step()
optimizer.zero_grad()
with torch.no_grad():
    eval_loss = loss_fn([torch.randn(8, 16), torch.randn(8, 16)])
print(f"train loss {loss.item():.4f}, eval loss {eval_loss.item():.4f}")
