"""The "learning to learn by gradient descent by gradient descent" baseline helper `fit_normal` with the fix given in the report's thread: the hand-designed optimizer is built from `[p for (_, p) in optimizee.all_named_parameters()]`, the optimizee's buffer-held weights that its meta-learning code also updates, so the Adam/RMSprop/SGD/NAG baselines fit the quadratic.

source: https://github.com/chenwydj/learning-to-learn-by-gradient-descent-by-gradient-descent/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn
from torch import optim

torch.manual_seed(0)

quadratic_dimension = 10


def w(v):
    return v


def to_var(x, requires_grad=True):
    return x.clone().requires_grad_(requires_grad)


class MetaModule(nn.Module):
    def all_named_parameters(self):
        return []


class QuadraticLoss:
    def __init__(self, training=True):
        self.W = w(torch.randn(quadratic_dimension, quadratic_dimension))
        self.y = w(torch.randn(quadratic_dimension))

    def get_loss(self, theta):
        return torch.sum((self.W.matmul(theta) - self.y) ** 2)


class QuadOptimizee(MetaModule):
    def __init__(self, theta=None):
        super().__init__()
        self.register_buffer('theta', to_var(torch.zeros(quadratic_dimension), requires_grad=True))

    def forward(self, target):
        return target.get_loss(self.theta)

    def all_named_parameters(self):
        return [('theta', self.theta)]


def fit_normal(target_cls, target_to_opt, opt_class, n_tests=5, n_epochs=50, **kwargs):
    results = []
    for i in range(n_tests):
        target = target_cls(training=False)
        optimizee = w(target_to_opt())
        optimizer = opt_class([p for (_, p) in optimizee.all_named_parameters()], **kwargs)
        total_loss = []
        for _ in range(n_epochs):
            loss = optimizee(target)
            total_loss.append(loss.data.cpu().numpy())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        results.append(total_loss)
    return results


NORMAL_OPTS = [(optim.Adam, {}), (optim.RMSprop, {}), (optim.SGD, {}), (optim.SGD, {'nesterov': True, 'momentum': 0.9})]
OPT_NAMES = ['ADAM', 'RMSprop', 'SGD', 'NAG']

for (opt_class, extra), name in zip(NORMAL_OPTS, OPT_NAMES):
    losses = fit_normal(QuadraticLoss, QuadOptimizee, opt_class, lr=0.003, **extra)
    print(name, "final loss", sum(l[-1] for l in losses) / len(losses))
