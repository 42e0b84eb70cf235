"""A user of moskomule/l0.pytorch, to watch the sampled L0 gate mask in TensorBoard, kept it in a module attribute `self.mask = nn.Parameter(torch.zeros(size), requires_grad=False)` and had `_get_mask` write the hard-concrete sample into it (`self.mask.data = hard_sigmoid(s)`) and return `self.mask`. The returned mask is that frozen leaf, not the sample, so the weight is multiplied by a tensor with no history: the task loss no longer reaches the gate locations `loc`, which now only feel the L0 penalty and are pushed shut, with no error. Writing through `.data` keeps the value and drops its history; the mask to multiply by is the computed one.

source: https://github.com/moskomule/l0.pytorch/issues/3
kind: bug
symptom: silent
verified: the task loss's gradient with respect to `loc` is None (cut off) at steps 0 and 19, and after 20 steps every gate location moved by the penalty alone (change mean -0.100, std 0.0000); in the look-alike that gradient has norm 0.0122 at step 0 and 0.0154 at step 19 and the gates move apart (change mean -0.041, std 0.0625)
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


def hard_sigmoid(x):
    return torch.clamp(x, 0.0, 1.0)


class L0Linear(nn.Module):
    def __init__(self, in_features, out_features, loc_mean=0.0, loc_sdev=0.01, beta=2 / 3,
                 gamma=-0.1, zeta=1.1):
        super().__init__()
        self._origin = nn.Linear(in_features, out_features)
        self._size = self._origin.weight.size()
        self.loc = nn.Parameter(torch.zeros(self._size).normal_(loc_mean, loc_sdev))
        self.temp, self.gamma, self.zeta = beta, gamma, zeta
        self.gamma_zeta_ratio = torch.log(torch.tensor(-gamma / zeta)).item()
        self.register_buffer("uniform", torch.zeros(self._size))
        self.mask = nn.Parameter(torch.zeros(self._size), requires_grad=False)

    def _get_mask(self):
        if self.training:
            self.uniform.uniform_(1e-6, 1 - 1e-6)
            u = self.uniform
            s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + self.loc) / self.temp)
            s = s * (self.zeta - self.gamma) + self.gamma
            penalty = torch.sigmoid(self.loc - self.temp * self.gamma_zeta_ratio).sum()
        else:
            s = torch.sigmoid(self.loc) * (self.zeta - self.gamma) + self.gamma
            penalty = 0
        self.mask.data = hard_sigmoid(s)  # ROOT
        return self.mask, penalty

    def forward(self, x):
        mask, penalty = self._get_mask()
        return F.linear(x, self._origin.weight * mask, self._origin.bias), penalty


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = L0Linear(10, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        h, penalty = self.fc1(x)
        return self.fc2(F.relu(h)), penalty


def main():
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 10, generator=gen)
    y = (x[:, :3].sum(1) > 0).long()
    loc0 = model.fc1.loc.detach().clone()
    for step in range(20):
        logits, penalty = model(x)
        task = F.cross_entropy(logits, y)
        (task_grad,) = torch.autograd.grad(task, model.fc1.loc, retain_graph=True, allow_unused=True)
        loss = task + 1e-3 * penalty
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in (0, 19):
            norm = None if task_grad is None else round(task_grad.norm().item(), 4)
            print(f"step {step} task loss {task.item():.4f} task-loss grad norm on loc: {norm}")
    moved = model.fc1.loc.detach() - loc0
    print(f"loc change: mean {moved.mean().item():.3f} std {moved.std().item():.4f}")


if __name__ == "__main__":
    main()
