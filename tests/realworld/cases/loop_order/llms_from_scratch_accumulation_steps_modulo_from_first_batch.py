"""LLMs-from-scratch ch06 additional experiments: with gradient accumulation the optimizer steps when batch_idx % accumulation_steps == 0, i.e. on the very first batch alone, and never after the last ones.

source: https://github.com/rasbt/LLMs-from-scratch/issues/299
kind: bug
symptom: silent
verified: with 10 batches and accumulation_steps=4 the optimizer steps after batches 1, 5 and 9 (the first step sees 1 micro-batch, the last batch's gradient is left in .grad unused); with the fix it steps after batches 4, 8 and 10
"""
import torch
import torch.nn as nn


def calc_loss_batch(input_batch, target_batch, model):
    logits = model(input_batch)[:, -1, :]
    return nn.functional.cross_entropy(logits, target_batch)


class GPTClassifier(nn.Module):
    def __init__(self, vocab=50, emb=16, num_classes=2):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, emb)
        self.trf = nn.Linear(emb, emb)
        self.out_head = nn.Linear(emb, num_classes)

    def forward(self, x):
        return self.out_head(torch.relu(self.trf(self.tok_emb(x))))


def train_classifier_simple(model, train_loader, optimizer, num_epochs, accumulation_steps=1):
    steps_at = []
    for epoch in range(num_epochs):
        model.train()
        for batch_idx, (input_batch, target_batch) in enumerate(train_loader):
            loss = calc_loss_batch(input_batch, target_batch, model)
            loss /= accumulation_steps
            loss.backward()
            if batch_idx % accumulation_steps == 0:  # ROOT
                optimizer.step()
                optimizer.zero_grad()
                steps_at.append(batch_idx + 1)
    return steps_at


torch.manual_seed(123)
model = GPTClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.1)
train_loader = [(torch.randint(0, 50, (1, 12)), torch.randint(0, 2, (1,))) for _ in range(10)]
print(train_classifier_simple(model, train_loader, optimizer, num_epochs=1, accumulation_steps=4))
