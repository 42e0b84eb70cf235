"""OpenPrompt tutorial after the fix: optimizer and scheduler step inside the gradient-accumulation branch.

source: https://github.com/thunlp/OpenPrompt/issues/106
kind: lookalike
verified: the optimizer steps 2 times for 8 micro-batches with gradient_accumulation_steps=4
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
prompt_model = nn.Sequential(nn.Embedding(30, 8), nn.Flatten(), nn.Linear(8 * 6, 2))
loss_func = nn.CrossEntropyLoss()
optimizer1 = torch.optim.AdamW(prompt_model.parameters(), lr=1e-3)
scheduler1 = torch.optim.lr_scheduler.LambdaLR(optimizer1, lambda step: 1.0)
gradient_accumulation_steps = 4
train_dataloader = [(torch.randint(0, 30, (2, 6)), torch.randint(0, 2, (2,))) for _ in range(8)]

steps_taken = 0
tot_loss, actual_step, glb_step = 0.0, 0, 0
prompt_model.train()
for step, (inputs, labels) in enumerate(train_dataloader):
    logits = prompt_model(inputs)
    loss = loss_func(logits, labels) / gradient_accumulation_steps
    loss.backward()
    tot_loss += loss.item()
    actual_step += 1
    if actual_step % gradient_accumulation_steps == 0:
        torch.nn.utils.clip_grad_norm_(prompt_model.parameters(), 1.0)
        glb_step += 1
        if optimizer1 is not None:
            optimizer1.step()
            optimizer1.zero_grad()
            steps_taken += 1
        if scheduler1 is not None:
            scheduler1.step()
print("optimizer steps:", steps_taken, "expected:", len(train_dataloader) // gradient_accumulation_steps)
