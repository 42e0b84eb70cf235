"""Text classifier ends in nn.Softmax and is trained with nn.CrossEntropyLoss, which applies log_softmax again.

source: https://github.com/illiterate/BertClassifier/issues/2
kind: bug
symptom: silent
verified: after 60 Adam steps the training loss is 0.755, against a floor of log(1 + 3/e) = 0.741 for softmax probabilities fed as logits over 4 classes; 0.018 without the softmax layer
"""
import torch
import torch.nn as nn


class TinyBert(nn.Module):
    def __init__(self, vocab=100, hidden=32):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.encoder = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())

    def forward(self, input_ids, attention_mask):
        h = self.encoder(self.embeddings(input_ids))
        mask = attention_mask.unsqueeze(-1).float()
        return (h * mask).sum(1) / mask.sum(1)


class BertClassifier(nn.Module):
    def __init__(self, num_labels=4, hidden=32):
        super().__init__()
        self.bert = TinyBert(hidden=hidden)
        self.dropout = nn.Dropout(0.1)
        self.linear = nn.Linear(hidden, num_labels)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, input_ids, attention_mask):
        pooled = self.bert(input_ids, attention_mask)
        logits = self.linear(self.dropout(pooled))
        return self.softmax(logits)  # ROOT


torch.manual_seed(0)
model = BertClassifier()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
input_ids = torch.randint(0, 100, (32, 12))
attention_mask = torch.ones(32, 12, dtype=torch.long)
labels = torch.randint(0, 4, (32,))
for step in range(60):
    output = model(input_ids=input_ids, attention_mask=attention_mask)
    loss = criterion(output, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
