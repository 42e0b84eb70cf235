"""Look-alike of s11: freeze=False, the vectors are fine-tuned."""
import torch
import torch.nn as nn


class TextClassifier(nn.Module):
    def __init__(self, vectors, n_classes):
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(vectors, freeze=False)
        self.fc = nn.Linear(vectors.size(1), n_classes)

    def forward(self, tokens):
        return self.fc(self.emb(tokens).mean(1))


torch.manual_seed(0)
model = TextClassifier(torch.randn(50, 16), 3)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(5):
    tokens, y = torch.randint(0, 50, (8, 7)), torch.randint(0, 3, (8,))
    loss = nn.functional.cross_entropy(model(tokens), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
