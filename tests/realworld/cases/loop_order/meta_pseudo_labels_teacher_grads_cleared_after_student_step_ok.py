"""meta-pseudo-labels-pytorch's training loop after its fix: right after the student's step it calls `m.tchr.model.zero_grad()` ("teacher should not be affected"), so the gradients the student's loss left in the teacher's parameters are cleared and the teacher steps on its own loss only.

source: https://github.com/ricoshin/meta-pseudo-labels-pytorch/commit/684c0af7e05d6149d6223030ab8a678b17925621
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class Learner:
    def __init__(self, model, lr):
        self.model = model
        self.optim = torch.optim.SGD(model.parameters(), lr=lr)

    def step_all(self):
        self.optim.step()
        self.optim.zero_grad()


def soft_xent_loss(student_logits, teacher_logits):
    return -(F.softmax(teacher_logits, -1) * F.log_softmax(student_logits, -1)).sum(-1).mean()


def train(tchr, stdn, steps=20):
    leaked = []
    for _ in range(steps):
        xs, ys = torch.randn(16, 10), torch.randint(0, 3, (16,))
        xu = torch.randn(32, 10)
        ys_pred_t = tchr.model(xs)
        loss_total = F.cross_entropy(ys_pred_t, ys)

        yu_pred_s = stdn.model(xu)
        yu_pred_t = tchr.model(xu)
        loss_mpl_s = soft_xent_loss(yu_pred_s, yu_pred_t)
        loss_mpl_s.backward()
        stdn.step_all()
        tchr.model.zero_grad()
        leaked.append(sum(p.grad.norm() ** 2 for p in tchr.model.parameters() if p.grad is not None) ** 0.5)

        loss_total = loss_total + F.cross_entropy(stdn.model(xs), ys)
        loss_total.backward()
        tchr.step_all()
    return torch.stack([torch.as_tensor(x) for x in leaked])


tchr = Learner(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3)), lr=0.1)
stdn = Learner(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3)), lr=0.1)
leaked = train(tchr, stdn)
print(f"teacher gradient left by the student's backward before the teacher's own: mean norm {leaked.mean().item():.4f}, "
      f"steps with a leak {(leaked > 0).sum().item()}/{len(leaked)}")
