"""ItemConv keeps its per-layer weights in a normal dict, so they are never trained.

source: https://github.com/xiaxin1998/COTREC/issues/15
kind: bug
symptom: silent
verified: conv.w_item['weight_item0'].weight never changes
"""
import torch
import torch.nn as nn


class ItemConv(nn.Module):
    def __init__(self, layers, emb_size=8):
        super(ItemConv, self).__init__()
        self.emb_size = emb_size
        self.layers = layers
        self.w_item = {}  # ROOT
        for i in range(self.layers):
            self.w_item['weight_item%d' % (i)] = nn.Linear(self.emb_size, self.emb_size, bias=False)

    def forward(self, adjacency, embedding):
        item_embeddings = embedding
        final = [item_embeddings]
        for i in range(self.layers):
            item_embeddings = self.w_item['weight_item%d' % (i)](item_embeddings)
            item_embeddings = torch.sparse.mm(adjacency, item_embeddings)
            final.append(item_embeddings)
        return torch.stack(final).sum(0)


torch.manual_seed(0)
n_items = 6
embedding = nn.Embedding(n_items, 8)
conv = ItemConv(layers=2)
adjacency = torch.eye(n_items).to_sparse()
optimizer = torch.optim.Adam(list(embedding.parameters()) + list(conv.parameters()), lr=1e-2)
target = torch.randn(n_items, 8)
for epoch in range(5):
    optimizer.zero_grad()
    out = conv(adjacency, embedding.weight)
    loss = ((out - target) ** 2).mean()
    loss.backward()
    optimizer.step()
