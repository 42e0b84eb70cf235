"""transformers' Trainer accumulates the logged loss with tr_loss += self.training_step(model, inputs), and training_step returns the loss it already backpropagated without detaching it: tr_loss becomes a chain of additions that keeps every step's autograd graph alive, so CPU/GPU memory grows with every step until the logging interval.

source: https://github.com/huggingface/transformers/pull/6999
kind: bug
symptom: silent
verified: after 30 steps tr_loss has a grad_fn and its graph holds 244 autograd nodes (about 8 per step) although every loss was already backpropagated; returning loss.detach() from training_step (the pull request) leaves tr_loss a plain tensor with no graph and the same value 33.73
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def count_nodes(t):
    seen, todo = set(), [t.grad_fn] if t.grad_fn is not None else []
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        todo.extend(f for f, _ in fn.next_functions)
    return len(seen)


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def compute_loss(self, model, inputs):
        logits = model(inputs['input_ids'])
        return F.cross_entropy(logits, inputs['labels'])

    def training_step(self, model, inputs):
        model.train()
        loss = self.compute_loss(model, inputs)
        loss.backward()
        return loss  # ROOT

    def train(self, batches):
        tr_loss = torch.tensor(0.0)
        for step, inputs in enumerate(batches):
            tr_loss += self.training_step(self.model, inputs)
            self.optimizer.step()
            self.model.zero_grad()
        return tr_loss


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3))
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01))
batches = [{'input_ids': torch.randn(8, 16), 'labels': torch.randint(0, 3, (8,))} for _ in range(30)]
tr_loss = trainer.train(batches)
print(round(tr_loss.item(), 2), tr_loss.requires_grad, count_nodes(tr_loss))
