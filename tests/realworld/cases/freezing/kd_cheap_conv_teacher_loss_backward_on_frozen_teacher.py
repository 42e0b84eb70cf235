"""A layer-wise distillation trainer (replace a teacher block by a cheap depthwise-separable block in the student) weights its hint loss by the importance of each replaced teacher block, computed from the teacher block's weight gradient after `teacher_loss.backward()`; but the student wrapper froze every teacher parameter when it deep-copied the teacher, and the trainer only unfreezes student blocks, so the teacher loss has no grad_fn and the importance backward fails on the first batch.

source: https://github.com/lehduong/Knowledge-Distillation-by-Replacing-Cheap-Conv/commit/98ac00c5db2ab95117e7dee11052dd2679bb2be0
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class SegNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.block1 = conv_block(3, 16)
        self.block2 = conv_block(16, 16)
        self.classifier = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        return self.classifier(self.block2(self.block1(x)))


class DepthwiseSeparable(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.depthwise = nn.Conv2d(cin, cin, 3, padding=1, groups=cin)
        self.pointwise = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        return F.relu(self.pointwise(self.depthwise(x)))


class DepthwiseStudent(nn.Module):
    def __init__(self, teacher):
        super().__init__()
        self.teacher = copy.deepcopy(teacher)
        self.teacher.eval()
        for param in self.teacher.parameters():
            param.requires_grad = False
        self.student = copy.deepcopy(self.teacher)
        self.replaced = []
        self.hidden = {"student": [], "teacher": []}

    def replace(self, names):
        for name in names:
            setattr(self.student, name, DepthwiseSeparable(16 if name != "block1" else 3, 16))
            self.replaced.append(name)
            getattr(self.student, name).register_forward_hook(lambda m, i, o: self.hidden["student"].append(o))
            getattr(self.teacher, name).register_forward_hook(lambda m, i, o: self.hidden["teacher"].append(o))

    def unfreeze(self, names):
        for name in names:
            for param in getattr(self.student, name).parameters():
                param.requires_grad = True

    def importance_of_teacher_blocks(self):
        scores = []
        for name in self.replaced:
            weight = getattr(self.teacher, name)[0].weight
            scores.append(((weight * weight.grad) ** 2).sum(dim=(1, 2, 3)).detach())
        return scores

    def forward(self, x):
        self.hidden = {"student": [], "teacher": []}
        return self.student(x), self.teacher(x)


class LayerwiseTrainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = None

    def prepare_epoch(self, names):
        self.model.replace(names)
        self.model.unfreeze(names)  # ROOT
        params = [p for p in self.model.student.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)

    def train_epoch(self, batches):
        for images, target in batches:
            out_st, out_tc = self.model(images)
            teacher_loss = F.cross_entropy(out_tc, target)
            teacher_loss.backward()
            importance = self.model.importance_of_teacher_blocks()
            hint = sum((w[None, :, None, None] * (s - t.detach()) ** 2).mean()
                       for s, t, w in zip(self.model.hidden["student"], self.model.hidden["teacher"], importance))
            self.optimizer.zero_grad()
            hint.backward()
            self.optimizer.step()
            print(f"hint loss {hint.item():.3e}")


teacher = SegNet()
trainer = LayerwiseTrainer(DepthwiseStudent(teacher))
trainer.prepare_epoch(["block2"])
batches = [(torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2, 16, 16))) for _ in range(3)]
trainer.train_epoch(batches)
