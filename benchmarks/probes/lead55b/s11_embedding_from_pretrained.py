"""Pretrained word vectors meant to be fine-tuned are loaded with from_pretrained's default freeze=True."""
import torch
import torch.nn as nn


class TextClassifier(nn.Module):
    def __init__(self, vectors, n_classes):
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(vectors)  # ROOT
        self.fc = nn.Linear(vectors.size(1), n_classes)

    def forward(self, tokens):
        return self.fc(self.emb(tokens).mean(1))


torch.manual_seed(0)
vectors = torch.randn(50, 16)
model = TextClassifier(vectors, 3)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
e0 = model.emb.weight.detach().clone()
for _ in range(5):
    tokens, y = torch.randint(0, 50, (8, 7)), torch.randint(0, 3, (8,))
    loss = nn.functional.cross_entropy(model(tokens), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("embeddings fine-tuned:", not torch.equal(e0, model.emb.weight))
