"""Embedding inspector converts rows of a trainable embedding weight to numpy for its plot.

source: https://github.com/tkalayci71/embedding-inspector/issues/22
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
token_embedding = nn.Embedding(100, 32)


def do_inspect(token_ids):
    emb_vec = token_embedding.weight[token_ids]
    x = torch.arange(emb_vec.shape[1])
    curves = []
    for u in range(emb_vec.shape[0]):
        curves.append((x.numpy(), emb_vec[u].numpy()))  # ROOT
    return curves


do_inspect(torch.tensor([3, 17, 42]))
