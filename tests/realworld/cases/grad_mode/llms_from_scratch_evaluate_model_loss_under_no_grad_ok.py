"""LLMs-from-scratch: evaluate_model computes the train and validation losses inside torch.no_grad() (after model.eval()) and switches back to model.train(); the training step computes its loss with grad enabled.

source: https://github.com/rasbt/LLMs-from-scratch/pull/119
kind: lookalike
verified: the evaluation losses carry no graph and every model parameter keeps training
"""
import torch
import torch.nn as nn


def calc_loss_batch(input_batch, target_batch, model):
    logits = model(input_batch)
    return nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())


def calc_loss_loader(data_loader, model, num_batches=None):
    total_loss = 0.
    for i, (input_batch, target_batch) in enumerate(data_loader):
        total_loss += calc_loss_batch(input_batch, target_batch, model).item()
    return total_loss / len(data_loader)


def evaluate_model(model, train_loader, val_loader, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, num_batches=eval_iter)
        val_loss = calc_loss_loader(val_loader, model, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


def train_model_simple(model, train_loader, val_loader, optimizer, num_epochs, eval_freq, eval_iter):
    train_losses, val_losses, global_step = [], [], -1
    for epoch in range(num_epochs):
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, model)
            loss.backward()
            optimizer.step()
            global_step += 1
            if global_step % eval_freq == 0:
                train_loss, val_loss = evaluate_model(model, train_loader, val_loader, eval_iter)
                train_losses.append(train_loss)
                val_losses.append(val_loss)
    return train_losses, val_losses


torch.manual_seed(123)
model = nn.Sequential(nn.Embedding(20, 16), nn.Dropout(0.1), nn.Linear(16, 20))
optimizer = torch.optim.AdamW(model.parameters(), lr=0.0004, weight_decay=0.1)
train_loader = [(torch.randint(0, 20, (2, 6)), torch.randint(0, 20, (2, 6))) for _ in range(3)]
val_loader = [(torch.randint(0, 20, (2, 6)), torch.randint(0, 20, (2, 6)))]
print(train_model_simple(model, train_loader, val_loader, optimizer, num_epochs=2, eval_freq=2, eval_iter=1))
