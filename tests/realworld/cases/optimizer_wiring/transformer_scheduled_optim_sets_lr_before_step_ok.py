"""attention-is-all-you-need-pytorch ScheduledOptim.step_and_update_lr updates the learning rate and then calls optimizer.step(); the schedule is computed from its own n_steps counter and sets every group's lr before the step, so the first update already uses the first warmup value (the thread's own conclusion).

source: https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/188
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ScheduledOptim():
    '''A simple wrapper class for learning rate scheduling'''

    def __init__(self, optimizer, lr_mul, d_model, n_warmup_steps):
        self._optimizer = optimizer
        self.lr_mul = lr_mul
        self.d_model = d_model
        self.n_warmup_steps = n_warmup_steps
        self.n_steps = 0

    def step_and_update_lr(self):
        "Step with the inner optimizer"
        self._update_learning_rate()
        self._optimizer.step()

    def zero_grad(self):
        "Zero out the gradients with the inner optimizer"
        self._optimizer.zero_grad()

    def _get_lr_scale(self):
        d_model = self.d_model
        n_steps, n_warmup_steps = self.n_steps, self.n_warmup_steps
        return (d_model ** -0.5) * min(n_steps ** (-0.5), n_steps * n_warmup_steps ** (-1.5))

    def _update_learning_rate(self):
        ''' Learning rate scheduling per step '''
        self.n_steps += 1
        lr = self.lr_mul * self._get_lr_scale()
        for param_group in self._optimizer.param_groups:
            param_group['lr'] = lr


torch.manual_seed(0)
transformer = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32,
                             dropout=0.1, batch_first=True)
generator = nn.Linear(16, 10)
optimizer = ScheduledOptim(
    torch.optim.Adam(list(transformer.parameters()) + list(generator.parameters()), betas=(0.9, 0.98), eps=1e-09),
    2.0, 16, 4000)
for step in range(3):
    src, trg = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    gold = torch.randint(0, 10, (2, 4))
    optimizer.zero_grad()
    pred = generator(transformer(src, trg))
    loss = F.cross_entropy(pred.view(-1, 10), gold.view(-1))
    loss.backward()
    optimizer.step_and_update_lr()
    print(step, optimizer._optimizer.param_groups[0]['lr'], loss.item())
