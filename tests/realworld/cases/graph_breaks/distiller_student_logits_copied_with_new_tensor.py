"""Knowledge distillation policy keeps the student's logits as out.new_tensor(out, requires_grad=True).

source: https://github.com/IntelLabs/distiller/issues/234
kind: bug
symptom: silent
verified: the student's weight gradient is identical with and without the distillation term (new_tensor copies and detaches)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class KnowledgeDistillationPolicy:
    def __init__(self, student, teacher, temperature=4.0, student_wt=0.5, distill_wt=0.5):
        self.student, self.teacher = student, teacher
        self.temperature = temperature
        self.student_wt, self.distill_wt = student_wt, distill_wt
        self.last_students_logits = None
        self.last_teacher_logits = None

    def forward(self, inputs):
        with torch.no_grad():
            self.last_teacher_logits = self.teacher(inputs)
        out = self.student(inputs)
        self.last_students_logits = out.new_tensor(out, requires_grad=True)  # ROOT
        return out

    def before_backward_pass(self, loss):
        soft_log_probs = F.log_softmax(self.last_students_logits / self.temperature, dim=1)
        soft_targets = F.softmax(self.last_teacher_logits / self.temperature, dim=1)
        distillation_loss = F.kl_div(soft_log_probs, soft_targets.detach(), reduction='sum') / soft_log_probs.shape[0]
        return self.student_wt * loss + self.distill_wt * distillation_loss


student = nn.Linear(20, 10)
teacher = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))
kd = KnowledgeDistillationPolicy(student, teacher)
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(5):
    x, y = torch.randn(16, 20), torch.randint(0, 10, (16,))
    output = kd.forward(x)
    loss = F.cross_entropy(output, y)
    overall_loss = kd.before_backward_pass(loss)
    optimizer.zero_grad()
    overall_loss.backward()
    optimizer.step()
