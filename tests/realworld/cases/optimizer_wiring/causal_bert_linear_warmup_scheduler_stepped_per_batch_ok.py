"""CausalBert training: the linear warmup/decay schedule is sized in optimizer steps, so stepping it every batch is right.

source: https://github.com/rpryzant/causal-bert-pytorch/issues/9
kind: lookalike
verified: the lr rises to 2e-5 over the 3 warmup batches and decays linearly to 0 at the last of the 12 batches
"""
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import LambdaLR


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda)


class CausalBert(nn.Module):
    def __init__(self, vocab=100, dim=16):
        super().__init__()
        self.embeddings = nn.EmbeddingBag(vocab, dim)
        self.Q_cls = nn.ModuleDict({'0': nn.Linear(dim + 1, 1), '1': nn.Linear(dim + 1, 1)})
        self.g_cls = nn.Linear(dim, 1)

    def forward(self, W_ids, C, T, Y):
        h = self.embeddings(W_ids)
        g = self.g_cls(h).squeeze(1)
        inputs = torch.cat([h, C.unsqueeze(1)], 1)
        Q0, Q1 = self.Q_cls['0'](inputs).squeeze(1), self.Q_cls['1'](inputs).squeeze(1)
        g_loss = nn.functional.binary_cross_entropy_with_logits(g, T)
        Q = torch.where(T.bool(), Q1, Q0)
        return g_loss + nn.functional.binary_cross_entropy_with_logits(Q, Y)


torch.manual_seed(0)
model = CausalBert()
dataloader = [(torch.randint(0, 100, (4, 10)), torch.rand(4), torch.randint(0, 2, (4,)).float(),
               torch.randint(0, 2, (4,)).float()) for _ in range(4)]
epochs, learning_rate = 3, 2e-5
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, eps=1e-8)
total_steps = len(dataloader) * epochs
warmup_steps = total_steps * 0.25
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)
lrs = []
for epoch in range(epochs):
    losses = []
    model.train()
    for step, batch in enumerate(dataloader):
        W_ids, C, T, Y = batch
        model.zero_grad()
        loss = model(W_ids, C, T, Y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
        losses.append(loss.detach().cpu().item())
print([round(lr, 8) for lr in lrs])
