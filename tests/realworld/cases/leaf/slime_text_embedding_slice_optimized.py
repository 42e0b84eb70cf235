"""Text embeddings to optimize taken as a slice of a requires-grad embedding: not a leaf.

source: https://github.com/aliasgharkhani/SLiMe/issues/10
kind: bug
symptom: crash
verified: can't optimize a non-leaf Tensor
"""
import torch
import torch.nn as nn


class Slime(nn.Module):
    def __init__(self, n_tokens=6, dim=8, parts=3):
        super().__init__()
        self.text_encoder = nn.Embedding(100, dim)
        with torch.no_grad():
            self.text_embedding = self.text_encoder(torch.arange(n_tokens)).unsqueeze(0)
        self.text_embedding.requires_grad_(True)
        self.embeddings_to_optimize = self.text_embedding[:, 1:1 + parts]  # ROOT
        self.head = nn.Linear(dim, 1)

    def configure_optimizers(self):
        return torch.optim.Adam([self.embeddings_to_optimize], lr=0.1)  # SYMPTOM

    def training_step(self):
        return self.head(self.embeddings_to_optimize).pow(2).mean()


torch.manual_seed(0)
model = Slime()
opt = model.configure_optimizers()
for _ in range(3):
    opt.zero_grad()
    model.training_step().backward()
    opt.step()
