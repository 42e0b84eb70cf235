"""Prompt-learning trainer sends a single nn.Parameter (the context vectors) straight to the optimizer builder.

source: https://github.com/KaiyangZhou/Dassl.pytorch/issues/67
kind: bug
symptom: crash
verified: TypeError: params argument given to the optimizer should be an iterable of Tensors or dicts, but got torch.FloatTensor
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


def build_optimizer(params, lr=2e-3):
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=5e-4)


class PromptLearner(nn.Module):
    def __init__(self, n_ctx=4, ctx_dim=16):
        super().__init__()
        self.ctx = nn.Parameter(torch.randn(n_ctx, ctx_dim) * 0.02)

    def forward(self, class_emb):
        return class_emb + self.ctx.mean(0)


prompt_learner = PromptLearner()
text_features = torch.randn(10, 16)
optim = build_optimizer(prompt_learner.ctx)  # ROOT
image_features = torch.randn(8, 16)
labels = torch.randint(0, 10, (8,))
for step in range(3):
    logits = image_features @ prompt_learner(text_features).t()
    loss = nn.functional.cross_entropy(logits, labels)
    optim.zero_grad()
    loss.backward()
    optim.step()
