"""transformers' run_glue.py `train()` loop with the condition proposed in the report: besides every `gradient_accumulation_steps`-th batch it also steps on the last batch of an epoch that is shorter than the accumulation window, so a small task with 3 batches per epoch still gets one optimizer step per epoch and the classifier trains.

source: https://github.com/huggingface/transformers/issues/2995
kind: lookalike
"""
import argparse

import torch
import torch.nn as nn
from torch.optim.lr_scheduler import LambdaLR


class TinyClassifier(nn.Module):
    def __init__(self, vocab=100, dim=16, num_labels=2):
        super().__init__()
        self.embeddings = nn.EmbeddingBag(vocab, dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids, labels):
        logits = self.classifier(self.embeddings(input_ids))
        return (nn.functional.cross_entropy(logits, labels), logits)


def train(args, train_dataloader, model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    scheduler = LambdaLR(optimizer, lambda step: 1.0)
    global_step = 0
    tr_loss = 0.0
    model.zero_grad()
    for _ in range(args.num_train_epochs):
        epoch_iterator = train_dataloader
        for step, batch in enumerate(epoch_iterator):
            model.train()
            inputs = {"input_ids": batch[0], "labels": batch[1]}
            outputs = model(**inputs)
            loss = outputs[0]
            if args.gradient_accumulation_steps > 1:
                loss = loss / args.gradient_accumulation_steps
            loss.backward()
            tr_loss += loss.item()
            if (step + 1) % args.gradient_accumulation_steps == 0 or (
                # last step in an epoch shorter than gradient_accumulation_steps
                (step + 1) < args.gradient_accumulation_steps and (step + 1) == len(epoch_iterator)
            ):
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                scheduler.step()
                model.zero_grad()
                global_step += 1
    return global_step, tr_loss


torch.manual_seed(0)
args = argparse.Namespace(learning_rate=5e-3, num_train_epochs=5, gradient_accumulation_steps=4,
                          max_grad_norm=1.0)
input_ids = torch.randint(0, 100, (24, 8))
labels = (input_ids[:, 0] % 2 == 0).long()
train_dataloader = [(input_ids[i:i + 8], labels[i:i + 8]) for i in range(0, 24, 8)]
model = TinyClassifier()
before = model.classifier.weight.detach().clone()
global_step, tr_loss = train(args, train_dataloader, model)
print("global_step", global_step, "classifier weight change %.5f" % (model.classifier.weight - before).abs().max().item())
