"""OML (mrcl) meta-learner after the fix: the inner-loop gradient of the adaptation parameters is taken with create_graph=True, so the meta-gradient is second order.

source: https://github.com/kjaved0/mrcl/issues/15
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn


class Learner(nn.Module):
    def __init__(self, in_dim=6, hidden=16, classes=4):
        super().__init__()
        self.vars = nn.ParameterList([
            nn.Parameter(torch.randn(hidden, in_dim) * 0.3), nn.Parameter(torch.zeros(hidden)),
            nn.Parameter(torch.randn(classes, hidden) * 0.3), nn.Parameter(torch.zeros(classes))])
        self.learn = [False, False, True, True]  # RLN is meta-learned, PLN adapts in the inner loop

    def forward(self, x, vars=None):
        vars = self.vars if vars is None else vars
        h = F.relu(F.linear(x, vars[0], vars[1]))
        return F.linear(h, vars[2], vars[3])

    def get_adaptation_parameters(self, vars):
        return [v for v, learn in zip(vars, self.learn) if learn]


class MetaLearingClassification(nn.Module):
    def __init__(self, update_lr=0.1, meta_lr=1e-3, update_step=3):
        super().__init__()
        self.update_lr, self.update_step = update_lr, update_step
        self.net = Learner()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=meta_lr)

    def inner_update(self, x, fast_weights, y):
        loss = F.cross_entropy(self.net(x, fast_weights), y)
        grad = torch.autograd.grad(loss, self.net.get_adaptation_parameters(fast_weights), create_graph=True)
        grad = iter(grad)
        return [p - self.update_lr * next(grad) if learn else p for p, learn in zip(fast_weights, self.net.learn)]

    def forward(self, x_traj, y_traj, x_rand, y_rand):
        fast_weights = list(self.net.parameters())
        for k in range(self.update_step):
            fast_weights = self.inner_update(x_traj[k], fast_weights, y_traj[k])
        meta_loss = F.cross_entropy(self.net(x_rand, fast_weights), y_rand)
        self.optimizer.zero_grad()
        meta_loss.backward()
        self.optimizer.step()
        return meta_loss.item()


torch.manual_seed(0)
maml = MetaLearingClassification()
for step in range(3):
    x_traj, y_traj = torch.randn(3, 5, 6), torch.randint(0, 4, (3, 5))
    x_rand, y_rand = torch.randn(10, 6), torch.randint(0, 4, (10,))
    print(maml(x_traj, y_traj, x_rand, y_rand))
