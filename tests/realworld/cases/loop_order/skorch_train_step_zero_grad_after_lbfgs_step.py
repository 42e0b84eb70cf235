"""skorch's NeuralNet.train_step calls self.optimizer_.zero_grad() once after self.optimizer_.step(step_fn) instead of inside step_fn: LBFGS evaluates the closure several times per step, every train_step_single call adds its loss.backward() onto the gradients of the earlier calls, and LBFGS's line search and curvature updates see a sum of stale gradients, so the fit does not converge.

source: https://github.com/skorch-dev/skorch/issues/636
kind: bug
symptom: silent
verified: on the second closure call of the first LBFGS step the gradient LBFGS reads has 2.02 times the norm of that call's own gradient (first three calls: 1.0, 2.02, 1.01), and the training MSE goes from 7.8981 to nan in 10 epochs; with zero_grad() inside step_fn (the fix, PR 639) the ratios are 1.0, 1.0, 1.0 and the MSE reaches 0.01
"""
import torch
from torch import nn


class FirstStepAccumulator:
    def __init__(self):
        self.step = None

    def store_step(self, step):
        if self.step is None:
            self.step = step

    def get_step(self):
        return self.step


class NeuralNet:  # reduced to the training step; skorch builds module_, criterion_ and optimizer_ in initialize()
    def __init__(self, module, criterion, optimizer, **optimizer_kwargs):
        self.module_ = module
        self.criterion_ = criterion
        self.optimizer_ = optimizer(self.module_.parameters(), **optimizer_kwargs)
        self.grad_ratios = []

    def get_loss(self, y_pred, y_true, X=None, training=False):
        return self.criterion_(y_pred, y_true)

    def train_step_single(self, Xi, yi, **fit_params):
        self.module_.train()
        y_pred = self.module_(Xi)
        loss = self.get_loss(y_pred, yi, X=Xi, training=True)
        fresh = torch.autograd.grad(loss, self.module_[0].weight, retain_graph=True)[0]  # measurement only
        loss.backward()
        self.grad_ratios.append((self.module_[0].weight.grad.norm() / fresh.norm()).item())
        return {'loss': loss, 'y_pred': y_pred}

    def get_train_step_accumulator(self):
        return FirstStepAccumulator()

    def train_step(self, Xi, yi, **fit_params):
        step_accumulator = self.get_train_step_accumulator()
        def step_fn():
            step = self.train_step_single(Xi, yi, **fit_params)
            step_accumulator.store_step(step)
            return step['loss']
        self.optimizer_.step(step_fn)
        self.optimizer_.zero_grad()  # ROOT
        return step_accumulator.get_step()


torch.manual_seed(0)
X = torch.randn(256, 5)
y = X @ torch.randn(5, 1) + 0.1 * torch.randn(256, 1)
net = NeuralNet(nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1)), nn.MSELoss(), torch.optim.LBFGS, lr=1.0)
with torch.no_grad():
    print("initial MSE", round(net.criterion_(net.module_(X), y).item(), 4))
for epoch in range(10):
    for start in range(0, 256, 128):
        net.train_step(X[start:start + 128], y[start:start + 128])
print("closure calls in the first step (grad / fresh grad):", [round(r, 2) for r in net.grad_ratios[:3]])
with torch.no_grad():
    print("MSE after 10 epochs", round(net.criterion_(net.module_(X), y).item(), 4))
