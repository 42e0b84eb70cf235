"""The Deep Frank-Wolfe optimizer after PR 5: DFW.step and _line_search skip every parameter whose grad is None, so a model with a frozen embedding layer trains with the frozen weights left as they are.

source: https://github.com/oval-group/dfw/pull/5
kind: lookalike
"""
from collections import defaultdict

import torch
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.optimizer import required


class DFW(optim.Optimizer):
    def __init__(self, params, eta=required, momentum=0, weight_decay=0, eps=1e-5):
        defaults = dict(eta=eta, momentum=momentum, weight_decay=weight_decay)
        super(DFW, self).__init__(params, defaults)
        self.eps = eps
        for group in self.param_groups:
            if group['momentum']:
                for p in group['params']:
                    self.state[p]['momentum_buffer'] = torch.zeros_like(p.data, requires_grad=False)

    @torch.autograd.no_grad()
    def step(self, closure):
        loss = float(closure())
        w_dict = defaultdict(dict)
        for group in self.param_groups:
            wd = group['weight_decay']
            for param in group['params']:
                if param.grad is None:
                    continue
                w_dict[param]['delta_t'] = param.grad.data
                w_dict[param]['r_t'] = wd * param.data
        self._line_search(loss, w_dict)
        for group in self.param_groups:
            eta = group['eta']
            mu = group['momentum']
            for param in group['params']:
                if param.grad is None:
                    continue
                state = self.state[param]
                delta_t, r_t = w_dict[param]['delta_t'], w_dict[param]['r_t']
                param.data -= eta * (r_t + self.gamma * delta_t)
                if mu:
                    z_t = state['momentum_buffer']
                    z_t *= mu
                    z_t -= eta * self.gamma * (delta_t + r_t)
                    param.data += mu * z_t

    @torch.autograd.no_grad()
    def _line_search(self, loss, w_dict):
        num = loss
        denom = 0
        for group in self.param_groups:
            eta = group['eta']
            for param in group['params']:
                if param.grad is None:
                    continue
                delta_t, r_t = w_dict[param]['delta_t'], w_dict[param]['r_t']
                num -= eta * torch.sum(delta_t * r_t)
                denom += eta * delta_t.norm() ** 2
        self.gamma = float((num / (denom + self.eps)).clamp(min=0, max=1))


class TextClassifier(torch.nn.Module):  # pretrained word embeddings, frozen, and a trainable classifier
    def __init__(self, vocab=100, dim=16, classes=4):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, dim)
        self.embedding.weight.requires_grad = False
        self.fc = torch.nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.fc(self.embedding(tokens).mean(1))


torch.manual_seed(0)
model = TextClassifier()
optimizer = DFW(model.parameters(), eta=0.1, momentum=0.9, weight_decay=1e-4)
tokens, labels = torch.randint(0, 100, (32, 12)), torch.randint(0, 4, (32,))
for epoch in range(3):
    optimizer.zero_grad()
    loss_value = F.multi_margin_loss(model(tokens), labels)  # the multi-class hinge loss DFW is designed for
    loss_value.backward()
    optimizer.step(lambda: float(loss_value))
    print("epoch", epoch, "loss", round(loss_value.item(), 4))
