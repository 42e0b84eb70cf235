"""Simple-Recipe-Distillation's ImageNet recipe puts a learned projector (self.embed, a Linear) inside its loss OurDistillationLoss, but DistillationBox builds the optimizer from trainable_module_list = [student_model] only: the projector gets gradients every step and is never updated, so the student is distilled through a fixed random projection.

source: https://github.com/roymiles/Simple-Recipe-Distillation/issues/1
kind: bug
symptom: silent
verified: after 5 SGD steps the projector's weight has changed by 0.0 (max abs) although its grad has norm 11.5308, while the student's fc weight has changed by 0.0138; with the projector appended to trainable_module_list (the fix) the projector's weight changes by 0.4492
"""
import torch
import torch.nn.functional as F
from torch import nn


def get_optimizer(module, key, param_dict=None, filters_params=True):
    optim_cls = {'sgd': torch.optim.SGD}[key.lower()]
    if isinstance(module, nn.Module) and filters_params:
        return optim_cls([p for p in module.parameters() if p.requires_grad], **param_dict)
    return optim_cls(module, **param_dict)


class OurDistillationLoss(nn.Module):
    def __init__(self, s_dim=32, t_dim=32):
        super().__init__()
        self.embed = nn.Linear(s_dim, t_dim)  # projector
        self.bn_s = torch.nn.BatchNorm1d(t_dim, eps=0.0001, affine=False)
        self.bn_t = torch.nn.BatchNorm1d(t_dim, eps=0.0001, affine=False)

    def forward_loss(self, z_s, z_t):
        f_s = self.embed(z_s)
        c_diff = torch.abs(self.bn_s(f_s) - self.bn_t(z_t)).pow(4.0)
        return torch.log(c_diff.sum())

    def forward(self, student_io_dict, teacher_io_dict):
        z_s = student_io_dict['layer4']['output'].mean(-1).mean(-1)
        z_t = teacher_io_dict['layer4']['output'].mean(-1).mean(-1)
        l_rep = 2.0 * self.forward_loss(z_s, z_t)
        p_s = F.log_softmax(student_io_dict['fc']['output'], dim=1)
        p_t = F.softmax(teacher_io_dict['fc']['output'], dim=1)
        return l_rep + F.kl_div(p_s, p_t, reduction='sum') / p_s.shape[0]


class Net(nn.Module):  # stands for the ResNets: a conv stage named layer4 and a classifier fc
    def __init__(self, width=32):
        super().__init__()
        self.layer4 = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc(self.layer4(x).mean(-1).mean(-1))


class DistillationBox(nn.Module):  # forward hooks fill the io dicts, as torchdistill's set_hooks does
    def __init__(self, teacher_model, student_model, criterion):
        super().__init__()
        self.teacher_model, self.student_model, self.criterion = teacher_model, student_model, criterion
        self.teacher_io_dict, self.student_io_dict = {}, {}
        for model, io_dict in ((teacher_model, self.teacher_io_dict), (student_model, self.student_io_dict)):
            for path in ('layer4', 'fc'):
                getattr(model, path).register_forward_hook(
                    lambda m, i, o, path=path, io_dict=io_dict: io_dict.update({path: {'output': o}}))
        trainable_module_list = nn.ModuleList([self.student_model])
        self.optimizer = get_optimizer(trainable_module_list, 'SGD', {'lr': 0.1, 'momentum': 0.9}, True)  # ROOT

    def forward(self, sample_batch):
        with torch.no_grad():
            self.teacher_model(sample_batch)
        self.student_model(sample_batch)
        return self.criterion(self.student_io_dict, self.teacher_io_dict)

    def update_params(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


torch.manual_seed(0)
teacher, student = Net().eval(), Net()
box = DistillationBox(teacher, student, OurDistillationLoss())
embed_before, fc_before = box.criterion.embed.weight.detach().clone(), student.fc.weight.detach().clone()
for step in range(5):
    loss = box(torch.randn(16, 3, 8, 8))
    box.update_params(loss)
print("projector weight change", (box.criterion.embed.weight - embed_before).abs().max().item(),
      "projector grad norm", round(box.criterion.embed.weight.grad.norm().item(), 4))
print("student fc weight change", round((student.fc.weight - fc_before).abs().max().item(), 4))
