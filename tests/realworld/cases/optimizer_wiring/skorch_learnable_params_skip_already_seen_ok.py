"""skorch's NeuralNet.get_all_learnable_params after PR #783: parameters already yielded (here the module's, again reached through the criterion that references it) are skipped, so the optimizer holds each parameter once and one SGD step moves it by lr * grad.

source: https://github.com/skorch-dev/skorch/pull/783
kind: lookalike
"""
import torch
from torch import nn


class MyModule(nn.Module):
    def __init__(self, num_units=16):
        super().__init__()
        self.dense0 = nn.Linear(20, num_units)
        self.nonlin = nn.ReLU()
        self.output = nn.Linear(num_units, 2)

    def forward(self, X):
        return torch.log_softmax(self.output(self.nonlin(self.dense0(X))), dim=-1)


class MyCriterion(nn.NLLLoss):
    """Criterion that references net.module_ to add a weight penalty."""
    def __init__(self, *args, themodule, alpha=1e-3, **kwargs):
        super().__init__(*args, **kwargs)
        self.themodule = themodule
        self.alpha = alpha

    def forward(self, y_pred, y_true):
        penalty = sum((p ** 2).sum() for n, p in self.themodule.named_parameters() if n.endswith("weight"))
        return super().forward(y_pred, y_true) + self.alpha * penalty


class NeuralNet:  # skorch.NeuralNet reduced to module, criterion and optimizer initialization and the train step
    def __init__(self, module, criterion, optimizer=torch.optim.SGD, lr=0.1):
        self.module, self.criterion, self.optimizer, self.lr = module, criterion, optimizer, lr
        self._modules, self._criteria = ['module'], ['criterion']

    def initialize(self):
        self.module_ = self.module()
        self.criterion_ = self.criterion(themodule=self.module_)
        self.initialize_optimizer()
        return self

    def get_all_learnable_params(self):
        seen = set()
        for name in self._modules + self._criteria:
            module = getattr(self, name + '_')
            named_parameters = getattr(module, 'named_parameters', None)
            if not named_parameters:
                continue

            for param_name, param in named_parameters():
                if param in seen:
                    continue

                seen.add(param)
                yield param_name, param

    def get_params_for_optimizer(self, prefix, named_parameters):
        pgroups = [{'params': [p for _, p in named_parameters]}]
        return (pgroups,), {'lr': self.lr}

    def initialize_optimizer(self):
        named_parameters = self.get_all_learnable_params()
        args, kwargs = self.get_params_for_optimizer('optimizer', named_parameters)
        self.optimizer_ = self.optimizer(*args, **kwargs)
        return self

    def train_step(self, Xi, yi):
        self.module_.train()
        self.optimizer_.zero_grad()
        y_pred = self.module_(Xi)
        loss = self.criterion_(y_pred, yi)
        loss.backward()
        self.optimizer_.step()
        return loss


torch.manual_seed(0)
net = NeuralNet(MyModule, criterion=MyCriterion).initialize()
X, y = torch.randn(64, 20), torch.randint(0, 2, (64,))
before = [p.detach().clone() for p in net.module_.parameters()]
net.train_step(X, y)
for (name, p), p0 in zip(net.module_.named_parameters(), before):
    ratio = ((p0 - p.detach()).norm() / (net.lr * p.grad).norm()).item()
    print(f"{name}: update / (lr * grad) = {ratio:.3f}")
