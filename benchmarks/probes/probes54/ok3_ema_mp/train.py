import torch
import torch.nn.functional as F
from models import EMATeacher, make_student
from optim import build_optimizer

student = make_student()
teacher = EMATeacher(student)
opt = build_optimizer(teacher, student)
before = student[0].weight.clone()
for _ in range(3):
    x = torch.randn(16, 10)
    loss = F.kl_div(F.log_softmax(student(x + 0.1 * torch.randn_like(x)), -1),
                    F.softmax(teacher(x), -1), reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
    teacher.update(student)
print("student moved:", not torch.equal(before, student[0].weight))
