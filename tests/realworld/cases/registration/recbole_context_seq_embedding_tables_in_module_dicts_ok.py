"""RecBole's ContextSeqEmbAbstractLayer after the fix (PR 1129): the per-type embedding tables are nn.ModuleDict()s, so the FMEmbedding and float nn.Embedding modules are registered and DIEN's optimizer trains the feature embeddings.

source: https://github.com/RUCAIBox/RecBole/issues/1128
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn


class FMEmbedding(nn.Module):
    def __init__(self, field_dims, offsets, output_dim):
        super().__init__()
        self.embedding = nn.Embedding(sum(field_dims), output_dim)
        self.offsets = offsets

    def forward(self, input_x):
        return self.embedding(input_x + input_x.new_tensor(self.offsets).unsqueeze(0))


class ContextSeqEmbAbstractLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_field_offsets = {}
        self.token_embedding_table = nn.ModuleDict()
        self.float_embedding_table = nn.ModuleDict()

    def get_embedding(self):
        for type in self.types:
            if len(self.token_field_dims[type]) > 0:
                self.token_field_offsets[type] = np.array((0, *np.cumsum(self.token_field_dims[type])[:-1]), dtype=np.int64)
                self.token_embedding_table[type] = FMEmbedding(self.token_field_dims[type], self.token_field_offsets[type], self.embedding_size)
            if len(self.float_field_dims[type]) > 0:
                self.float_embedding_table[type] = nn.Embedding(sum(self.float_field_dims[type]), self.embedding_size)

    def forward(self, token_fields, float_fields):
        sparse = {t: self.token_embedding_table[t](token_fields[t]) for t in self.types}
        index = {t: torch.arange(float_fields[t].shape[-1]).expand_as(float_fields[t]) for t in self.types}
        dense = {t: self.float_embedding_table[t](index[t]) * float_fields[t].unsqueeze(-1) for t in self.types}
        return sparse, dense


class ContextSeqEmbLayer(ContextSeqEmbAbstractLayer):
    def __init__(self, embedding_size):
        super().__init__()
        self.embedding_size = embedding_size
        self.types = ["user", "item"]
        self.token_field_dims = {"user": [20, 3], "item": [50, 6]}
        self.float_field_dims = {"user": [1], "item": [1]}
        self.get_embedding()


class DIEN(nn.Module):
    def __init__(self, embedding_size=8):
        super().__init__()
        self.embedding_layer = ContextSeqEmbLayer(embedding_size)
        self.dnn_mlp_layers = nn.Sequential(nn.Linear(6 * embedding_size, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, token_fields, float_fields):
        sparse, dense = self.embedding_layer(token_fields, float_fields)
        feats = torch.cat([sparse["user"], dense["user"], sparse["item"], dense["item"]], dim=1).flatten(1)
        return torch.sigmoid(self.dnn_mlp_layers(feats)).squeeze(-1)


torch.manual_seed(0)
model = DIEN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
item_table = model.embedding_layer.token_embedding_table["item"].embedding
start = item_table.weight.detach().clone()
token_fields = {"user": torch.stack([torch.randint(0, 20, (64,)), torch.randint(0, 3, (64,))], 1),
                "item": torch.stack([torch.randint(0, 50, (64,)), torch.randint(0, 6, (64,))], 1)}
float_fields = {"user": torch.rand(64, 1), "item": torch.rand(64, 1)}
label = torch.randint(0, 2, (64,)).float()
for _ in range(30):
    loss = nn.functional.binary_cross_entropy(model(token_fields, float_fields), label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("parameter tensors", len(list(model.parameters())), "item embedding moved", (item_table.weight - start).norm().item(),
      "grad norm", item_table.weight.grad.norm().item())
