"""pytorch-frame's HashTextEmbedder after PR 229: it returns self.embedding(idx).detach(), so the text embeddings stored at materialization are plain input features and every training mini-batch backpropagates only through the model.

source: https://github.com/pyg-team/pytorch-frame/pull/229
kind: lookalike
"""
from typing import Callable, List, Optional

import torch
from torch import Tensor
from torch.nn import Embedding


class HashTextEmbedder:
    def __init__(self, out_channels: int, num_hash_bins: int = 64, device: Optional[torch.device] = None):
        self.out_channels = out_channels
        self.num_hash_bins = num_hash_bins
        self.device = device
        self.embedding = Embedding(num_hash_bins, out_channels).to(device)

    def __call__(self, sentences: List[str]) -> Tensor:
        idx = torch.LongTensor([hash(s) % self.num_hash_bins for s in sentences], device=self.device)
        return self.embedding(idx).detach()


class TextEmbeddingTensorMapper:
    def __init__(self, text_embedder: Callable[[List[str]], Tensor], batch_size: Optional[int]):
        self.text_embedder = text_embedder
        self.batch_size = batch_size

    def forward(self, ser_list: List[str], *, device: Optional[torch.device] = None) -> Tensor:
        if self.batch_size is None:
            return self.text_embedder(ser_list).to(device)
        emb_list = []
        for i in range(0, len(ser_list), self.batch_size):
            emb = self.text_embedder(ser_list[i:i + self.batch_size])
            emb_list.append(emb.to(device))
        return torch.cat(emb_list, dim=0)


torch.manual_seed(0)
texts = ["title %d" % (i % 7) for i in range(64)]
numerical = torch.randn(64, 3)
y = torch.randn(64, 1)
# Dataset.materialize(): the text_embedded column is converted once into a tensor
mapper = TextEmbeddingTensorMapper(HashTextEmbedder(out_channels=8), batch_size=16)
feat_dict = {"numerical": numerical, "embedding": mapper.forward(texts)}

model = torch.nn.Sequential(torch.nn.Linear(3 + 8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(2):
    for start in range(0, 64, 16):
        x = torch.cat([feat_dict["numerical"][start:start + 16], feat_dict["embedding"][start:start + 16]], dim=1)
        loss = torch.nn.functional.mse_loss(model(x), y[start:start + 16])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("epoch", epoch, "loss", round(loss.item(), 4))
