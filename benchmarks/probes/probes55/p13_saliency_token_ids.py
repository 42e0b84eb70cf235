import torch
import torch.nn as nn


class TextCNN(nn.Module):
    def __init__(self, vocab=100, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.conv = nn.Conv1d(dim, 8, 3, padding=1)
        self.fc = nn.Linear(8, 2)

    def forward(self, ids):
        h = self.conv(self.emb(ids).transpose(1, 2)).relu().amax(-1)
        return self.fc(h)


def saliency(model, batch):
    ids = batch["input_ids"].clone().requires_grad_(True)  # ROOT
    score = model(ids)[:, batch["label"]].sum()
    score.backward()
    return ids.grad.abs()


model = TextCNN()
batch = {"input_ids": torch.randint(0, 100, (2, 12)), "label": 1}
print(saliency(model, batch).shape)
