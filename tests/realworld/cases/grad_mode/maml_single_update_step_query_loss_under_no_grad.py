"""MAML-Pytorch with update_step=1: the only query loss kept for the meta update was computed under no_grad.

source: https://github.com/dragen1860/MAML-Pytorch/issues/40
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Learner(nn.Module):
    def __init__(self, n_in, n_way):
        super().__init__()
        self.vars = nn.ParameterList([nn.Parameter(torch.randn(16, n_in) * 0.1), nn.Parameter(torch.zeros(16)),
                                      nn.Parameter(torch.randn(n_way, 16) * 0.1), nn.Parameter(torch.zeros(n_way))])

    def forward(self, x, vars=None):
        w1, b1, w2, b2 = self.vars if vars is None else vars
        return F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)


class Meta(nn.Module):
    def __init__(self, n_in, n_way, update_lr=0.4, meta_lr=1e-3, update_step=1):
        super().__init__()
        self.update_lr, self.update_step = update_lr, update_step
        self.net = Learner(n_in, n_way)
        self.meta_optim = torch.optim.Adam(self.net.parameters(), lr=meta_lr)

    def forward(self, x_spt, y_spt, x_qry, y_qry):
        task_num = x_spt.size(0)
        losses_q = [0 for _ in range(self.update_step + 1)]
        for i in range(task_num):
            logits = self.net(x_spt[i], vars=None)
            loss = F.cross_entropy(logits, y_spt[i])
            grad = torch.autograd.grad(loss, self.net.parameters())
            fast_weights = list(map(lambda p: p[1] - self.update_lr * p[0], zip(grad, self.net.parameters())))
            with torch.no_grad():
                logits_q = self.net(x_qry[i], self.net.parameters())
                losses_q[0] += F.cross_entropy(logits_q, y_qry[i])
            with torch.no_grad():  # ROOT
                logits_q = self.net(x_qry[i], fast_weights)
                losses_q[1] += F.cross_entropy(logits_q, y_qry[i])
            for k in range(1, self.update_step):
                loss = F.cross_entropy(self.net(x_spt[i], fast_weights), y_spt[i])
                grad = torch.autograd.grad(loss, fast_weights)
                fast_weights = list(map(lambda p: p[1] - self.update_lr * p[0], zip(grad, fast_weights)))
                losses_q[k + 1] += F.cross_entropy(self.net(x_qry[i], fast_weights), y_qry[i])
        loss_q = losses_q[-1] / task_num
        self.meta_optim.zero_grad()
        loss_q.backward()  # SYMPTOM
        self.meta_optim.step()
        return loss_q.item()


torch.manual_seed(0)
maml = Meta(n_in=8, n_way=5, update_step=1)
x_spt, y_spt = torch.randn(4, 5, 8), torch.randint(0, 5, (4, 5))
x_qry, y_qry = torch.randn(4, 15, 8), torch.randint(0, 5, (4, 15))
maml(x_spt, y_spt, x_qry, y_qry)
