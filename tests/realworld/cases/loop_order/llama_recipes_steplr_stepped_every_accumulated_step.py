"""llama-recipes train_utils: StepLR(step_size=1, gamma=0.85) is meant to decay the learning rate once per epoch, but lr_scheduler.step() sits next to optimizer.step() in the gradient-accumulation branch, so the rate decays at every optimizer step and is nearly zero after the first epoch.

source: https://github.com/meta-llama/llama-cookbook/issues/27
kind: bug
symptom: silent
verified: after one epoch of 8 optimizer steps the learning rate is 1e-4 * 0.85**8 = 2.7e-5 instead of 8.5e-5
"""
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import StepLR


def train(model, train_dataloader, optimizer, lr_scheduler, gradient_accumulation_steps, num_epochs):
    for epoch in range(num_epochs):
        model.train()
        total_loss = 0.0
        for step, batch in enumerate(train_dataloader):
            inputs, labels = batch
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss = loss / gradient_accumulation_steps
            total_loss += loss.detach().float()
            loss.backward()
            if (step + 1) % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                optimizer.zero_grad()
                lr_scheduler.step()  # ROOT
        print(f"Epoch {epoch + 1}: loss={total_loss / len(train_dataloader):.4f}, "
              f"lr={optimizer.param_groups[0]['lr']:.2e}")


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
scheduler = StepLR(optimizer, step_size=1, gamma=0.85)
train_dataloader = [(torch.randn(4, 16), torch.randint(0, 4, (4,))) for _ in range(32)]
train(model, train_dataloader, optimizer, scheduler, gradient_accumulation_steps=4, num_epochs=2)
