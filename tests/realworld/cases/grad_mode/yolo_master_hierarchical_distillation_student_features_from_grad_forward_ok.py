"""YOLO-Master's hierarchical distillation after the pull request: the student's features are captured by the hooks during the gradient-enabled forward (cache cleared first) and only the teacher runs under torch.no_grad(), so the hierarchical term trains the student.

source: https://github.com/Tencent/YOLO-Master/pull/240
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def small_net(width):
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, 8, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))


class DistillTrainer:
    def __init__(self, student, teacher, layers=(1, 3)):
        self.student, self.teacher = student, teacher
        self.student_cache, self.teacher_cache = {}, {}
        for i in layers:
            student[i].register_forward_hook(self._hook(self.student_cache, i))
            teacher[i].register_forward_hook(self._hook(self.teacher_cache, i))

    @staticmethod
    def _hook(cache, key):
        def fn(module, inputs, output):
            cache[key] = output
        return fn

    def compute_hierarchical_distillation_loss(self, img):
        self.teacher_cache.clear()
        with torch.no_grad():
            self.teacher(img)
        return sum(F.mse_loss(self.student_cache[k], self.teacher_cache[k]) for k in self.teacher_cache)

    def step(self, img, target, optimizer, weight=1.0):
        self.student_cache.clear()
        pred = self.student(img)
        det_loss = F.cross_entropy(pred, target)
        hier_loss = self.compute_hierarchical_distillation_loss(img)
        loss = det_loss + weight * hier_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return det_loss.item(), hier_loss.item()


torch.manual_seed(0)
student, teacher = small_net(8), small_net(8)
for p in teacher.parameters():
    p.requires_grad_(False)
trainer = DistillTrainer(student, teacher)
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
img, target = torch.randn(8, 3, 12, 12), torch.randint(0, 4, (8,))
for it in range(30):
    det, hier = trainer.step(img, target, optimizer)
print(it, round(det, 4), round(hier, 4))
