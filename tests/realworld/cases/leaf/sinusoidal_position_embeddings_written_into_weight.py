"""Transformer notebook fills nn.Embedding's weight with sinusoids in place; building the model fails.

source: https://github.com/Atcold/NYU-DLSP20/issues/765
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import numpy as np
import torch
import torch.nn as nn


def create_sinusoidal_embeddings(nb_p, dim, E):
    theta = np.array([[p / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for p in range(nb_p)])
    E[:, 0::2] = torch.FloatTensor(np.sin(theta[:, 0::2]))  # ROOT
    E[:, 1::2] = torch.FloatTensor(np.cos(theta[:, 1::2]))
    E.detach_()
    E.requires_grad = False


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab_size, max_position_embeddings):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, d_model, padding_idx=1)
        self.position_embeddings = nn.Embedding(max_position_embeddings, d_model)
        create_sinusoidal_embeddings(nb_p=max_position_embeddings, dim=d_model,
                                     E=self.position_embeddings.weight)
        self.LayerNorm = nn.LayerNorm(d_model, eps=1e-12)

    def forward(self, input_ids):
        position_ids = torch.arange(input_ids.size(1)).unsqueeze(0).expand_as(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        return self.LayerNorm(embeddings)


torch.manual_seed(0)
emb = Embeddings(d_model=8, vocab_size=20, max_position_embeddings=10)
classifier = nn.Linear(8, 2)
optimizer = torch.optim.Adam(list(emb.parameters()) + list(classifier.parameters()), lr=1e-3)
ids, labels = torch.randint(0, 20, (4, 6)), torch.randint(0, 2, (4,))
loss = nn.functional.cross_entropy(classifier(emb(ids).mean(1)), labels)
loss.backward()
optimizer.step()
