"""Mean-teacher momentum update averages the student's parameters and its floating-point buffers into the teacher.

source: https://github.com/saltoricristiano/cosmix-uda/issues/21
kind: lookalike
"""
import copy
import torch
import torch.nn as nn

torch.manual_seed(0)


class MomentumUpdater:
    def __init__(self, base_tau=0.99):
        self.cur_tau = base_tau

    @torch.no_grad()
    def update(self, online_net, momentum_net):
        for op, mp in zip(online_net.parameters(), momentum_net.parameters()):
            mp.data.mul_(self.cur_tau)
            mp.data.add_(op.data * (1 - self.cur_tau))
        for ob, mb in zip(online_net.buffers(), momentum_net.buffers()):
            if mb.is_floating_point():
                mb.data.mul_(self.cur_tau)
                mb.data.add_(ob.data * (1 - self.cur_tau))
            else:
                mb.data.copy_(ob.data)


student = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
teacher = copy.deepcopy(student)
teacher.eval()
for p in teacher.parameters():
    p.requires_grad = False
updater = MomentumUpdater()
optimizer = torch.optim.SGD(student.parameters(), lr=0.05)
for step in range(20):
    source = torch.randn(32, 6) * 2 + 3
    target = torch.randn(32, 6) * 2 + 3
    with torch.no_grad():
        pseudo = teacher(target).argmax(1)
    loss = nn.functional.cross_entropy(student(source), torch.randint(0, 3, (32,))) + \
        nn.functional.cross_entropy(student(target), pseudo)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    updater.update(student, teacher)
print(teacher[1].running_mean.abs().max().item(), student[1].running_mean.abs().max().item())
