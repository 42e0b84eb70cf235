"""Relational distillation: the teacher's angles are computed under no_grad, the student's with grad.

source: https://github.com/lenscloth/RKD/issues/16
kind: lookalike
verified: student.weight.grad is set, teacher gets no gradient (intended)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RKdAngle(nn.Module):
    def forward(self, student, teacher):
        with torch.no_grad():
            td = teacher.unsqueeze(0) - teacher.unsqueeze(1)
            norm_td = F.normalize(td, p=2, dim=2)
            t_angle = torch.bmm(norm_td, norm_td.transpose(1, 2)).view(-1)
        sd = student.unsqueeze(0) - student.unsqueeze(1)
        norm_sd = F.normalize(sd, p=2, dim=2)
        s_angle = torch.bmm(norm_sd, norm_sd.transpose(1, 2)).view(-1)
        return F.smooth_l1_loss(s_angle, t_angle)


torch.manual_seed(0)
student, teacher = nn.Linear(8, 4), nn.Linear(8, 4)
opt = torch.optim.SGD(student.parameters(), lr=0.1)
criterion = RKdAngle()
images = torch.randn(6, 8)
for _ in range(3):
    with torch.no_grad():
        t_e = teacher(images)
    opt.zero_grad()
    loss = criterion(student(images), t_e)
    loss.backward()
    opt.step()
print(student.weight.grad is not None)
