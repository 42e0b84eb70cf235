"""GLUE fine-tuning with gradient accumulation clips after every micro-batch backward instead of once before optimizer.step().

source: https://github.com/huggingface/transformers/issues/1563
kind: bug
symptom: silent
verified: the applied gradient is not the clipped accumulated gradient: earlier micro-batches are shrunk by every later clip (cosine 0.967 and difference norm 0.26 against clipping once before the step)
"""
import torch
import torch.nn as nn


class args:
    gradient_accumulation_steps = 4
    max_grad_norm = 1.0
    learning_rate = 2e-5


torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(100, 32), nn.Flatten(), nn.Linear(32 * 6, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
train_dataloader = [(torch.randint(0, 100, (8, 6)), torch.randint(0, 2, (8,))) for _ in range(8)]
model.zero_grad()
for step, (input_ids, labels) in enumerate(train_dataloader):
    model.train()
    loss = nn.functional.cross_entropy(model(input_ids), labels)
    loss = loss / args.gradient_accumulation_steps
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)  # ROOT
    if (step + 1) % args.gradient_accumulation_steps == 0:
        total = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
        print("grad norm at step", total.item())
        optimizer.step()
        model.zero_grad()
