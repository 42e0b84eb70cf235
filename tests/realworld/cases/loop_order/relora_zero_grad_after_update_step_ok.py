"""ReLoRA after the fix: the pre-training loop clears the gradients only after the update (`optimizer.step(); scheduler.step(); optimizer.zero_grad()`), so the gradients of the `gradient_accumulation` micro-batches add up and each update steps with the gradient of their mean loss.

source: https://github.com/Guitaricet/relora/commit/0480465e068d8d3f6ccb3a56dbe37b45e27235ae
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Args:
    batch_size = 4
    gradient_accumulation = 4
    num_training_steps = 3
    max_length = 16
    lr = 1e-3


class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.mlp(self.emb(input_ids)))
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1), ignore_index=-100)


def batches(args):
    g = torch.Generator().manual_seed(1)
    while True:
        yield {"input_ids": torch.randint(0, 50, (args.batch_size, args.max_length), generator=g)}


args = Args()
model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)

global_step = 0
update_step = 0
window = []  # the micro-batches of the current update, kept to measure the intended gradient
for batch in batches(args):
    global_step += 1
    if global_step > args.num_training_steps * args.gradient_accumulation:
        print(f"Reached max number of update steps ({args.num_training_steps}). Stopping training.")
        break

    labels = batch["input_ids"].clone()
    labels[labels == 0] = -100
    window.append((batch, labels))

    loss = model(**batch, labels=labels) / args.gradient_accumulation
    loss.backward()

    if global_step % args.gradient_accumulation != 0:
        continue

    # measurement: the gradient of the mean loss over the update's micro-batches
    full = sum(model(**b, labels=l) for b, l in window) / args.gradient_accumulation
    intended = torch.autograd.grad(full, model.lm_head.weight)[0]
    used = model.lm_head.weight.grad
    window = []

    update_step += 1
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    print(f"update {update_step}: loss {loss.item() * args.gradient_accumulation:.4f}; relative error of the stepped gradient "
          f"{((used - intended).norm() / intended.norm()).item():.3f}; norm ratio {(used.norm() / intended.norm()).item():.3f}")
