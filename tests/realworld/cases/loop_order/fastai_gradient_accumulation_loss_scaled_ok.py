"""fastai-style gradient accumulation with the loss divided by n_acc/bs before backward (the issue's fix): the accumulated gradient equals the gradient of the same samples in one batch.

source: https://github.com/fastai/fastai/issues/3023
kind: lookalike
"""
import torch
import torch.nn as nn


class CancelBatchException(Exception):
    pass


class GradientAccumulation:
    "Accumulate gradients before updating weights"
    def __init__(self, n_acc=32):
        self.n_acc = n_acc

    def before_fit(self, learn):
        self.count = 0

    def after_loss(self, learn):
        learn.loss_grad = learn.loss_grad / (self.n_acc / learn.yb.shape[0])

    def after_backward(self, learn):
        self.count += learn.yb.shape[0]
        if self.count < self.n_acc:
            raise CancelBatchException()  # skip weight update
        else:
            self.count = 0


class Learner:
    def __init__(self, model, loss_func, opt, cbs):
        self.model, self.loss_func, self.opt, self.cbs = model, loss_func, opt, cbs

    def fit(self, batches):
        for cb in self.cbs:
            cb.before_fit(self)
        self.stepped_grads = []
        for xb, yb in batches:
            self.xb, self.yb = xb, yb
            try:
                self.pred = self.model(xb)
                self.loss_grad = self.loss_func(self.pred, yb)
                for cb in self.cbs:
                    getattr(cb, 'after_loss', lambda learn: None)(self)
                self.loss_grad.backward()
                for cb in self.cbs:
                    cb.after_backward(self)
                self.stepped_grads.append(self.model.weight.grad.clone())
                self.opt.step()
                self.opt.zero_grad()
            except CancelBatchException:
                pass


torch.manual_seed(0)
model = nn.Linear(6, 1)
x, y = torch.randn(32, 6), torch.randn(32, 1)
reference = model.weight.detach().clone().requires_grad_()
full_batch_grad = torch.autograd.grad(nn.functional.mse_loss(x @ reference.t() + model.bias.detach(), y), reference)[0]
learn = Learner(model, nn.functional.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1), [GradientAccumulation(n_acc=32)])
learn.fit([(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)])
print(learn.stepped_grads[0].norm().item(), full_batch_grad.norm().item())
