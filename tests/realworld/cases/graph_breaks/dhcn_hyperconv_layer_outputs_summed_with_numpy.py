"""DHCN HyperConv sums its per-layer item embeddings with np.sum, which turns tensors that require grad into numpy.

source: https://github.com/xiaxin1998/DHCN/issues/8
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
"""
import numpy as np
import torch
import torch.nn as nn


class HyperConv(nn.Module):
    def __init__(self, layers, emb_size=16):
        super(HyperConv, self).__init__()
        self.emb_size = emb_size
        self.layers = layers

    def forward(self, adjacency, embedding):
        item_embeddings = embedding
        final = [item_embeddings]
        for i in range(self.layers):
            item_embeddings = torch.sparse.mm(adjacency, item_embeddings)
            final.append(item_embeddings)
        item_embeddings = np.sum(final, 0)  # ROOT
        return item_embeddings


torch.manual_seed(0)
n_node = 10
embedding = nn.Embedding(n_node, 16)
dense = (torch.rand(n_node, n_node) > 0.7).float()
adjacency = (dense / dense.sum(1, keepdim=True).clamp(min=1)).to_sparse()
hyper = HyperConv(layers=2)
optimizer = torch.optim.Adam(embedding.parameters(), lr=0.001)
item_embeddings = hyper(adjacency, embedding.weight)
loss = item_embeddings.pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
