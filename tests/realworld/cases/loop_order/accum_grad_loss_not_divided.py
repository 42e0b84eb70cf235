"""ASR training with accum_grad_n_steps backpropagates each micro-batch loss without dividing it.

source: https://github.com/hirofumi0810/neural_sp/issues/168
kind: bug
symptom: silent
verified: the gradient used by optimizer.step() is accum_grad_n_steps times the mean micro-batch gradient
"""
import torch
import torch.nn as nn


class Speech2Text(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(10, 8)
        self.dec = nn.Linear(8, 5)

    def forward(self, batch):
        xs, ys = batch
        return nn.functional.cross_entropy(self.dec(torch.tanh(self.enc(xs))), ys)


torch.manual_seed(0)
model = Speech2Text()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
accum_grad_n_steps = 4
batches = [(torch.randn(3, 10), torch.randint(0, 5, (3,))) for _ in range(8)]
for step, batch in enumerate(batches):
    if step % accum_grad_n_steps == 0:
        optimizer.zero_grad()
    loss = model(batch)
    loss.backward()  # ROOT
    if (step + 1) % accum_grad_n_steps == 0:
        optimizer.step()
