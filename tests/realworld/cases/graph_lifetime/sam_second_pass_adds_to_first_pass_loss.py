"""SAM with a multi-task loss: the second forward's task losses are added to `loss`, which still holds the first pass (already backpropagated), so the second backward runs into the freed first graph.

source: https://github.com/davda54/sam/issues/10
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        defaults = dict(rho=rho, **kwargs)
        super(SAM, self).__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale.to(p)
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    def _grad_norm(self):
        return torch.norm(torch.stack([p.grad.norm(p=2) for group in self.param_groups
                                       for p in group["params"] if p.grad is not None]), p=2)


def get_loss(output, target, index):
    loss = F.binary_cross_entropy_with_logits(output[:, index], target[:, index])
    acc = ((output[:, index] > 0).float() == target[:, index]).float().mean()
    return loss, acc


torch.manual_seed(0)
num_tasks = 3
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, num_tasks))
optimizer = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
image, target = torch.randn(8, 10), torch.randint(0, 2, (8, num_tasks)).float()
loss_sum, acc_sum = [0.0] * num_tasks, [0.0] * num_tasks

output = model(image)
loss = 0
for t in range(num_tasks):
    loss_t, acc_t = get_loss(output, target, t)
    loss += loss_t
    loss_sum[t] += loss_t.item()
    acc_sum[t] += acc_t.item()
optimizer.zero_grad()
loss.backward()
optimizer.first_step(zero_grad=True)

output = model(image)
for t in range(num_tasks):
    loss_t, acc_t = get_loss(output, target, t)
    loss += loss_t  # ROOT
    loss_sum[t] += loss_t.item()
    acc_sum[t] += acc_t.item()
loss.backward()  # SYMPTOM
optimizer.second_step(zero_grad=True)
