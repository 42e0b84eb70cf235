"""yolov8 distillation trainer: the 1x1 align convolutions live in the FeatureLoss module built after the optimizer, which only holds the student's parameters, so the aligners stay at their random initialization.

source: https://github.com/huangzongmou/yolov8_Distillation/issues/5
kind: bug
symptom: silent
verified: d_loss.distill_loss_fn.align_module[0].weight gets a gradient every step and never changes
"""
import torch
import torch.nn as nn


class CWDLoss(nn.Module):
    def __init__(self, tau=1.0):
        super().__init__()
        self.tau = tau

    def forward(self, y_s, y_t):
        losses = []
        for s, t in zip(y_s, y_t):
            N, C, H, W = s.shape
            soft_t = torch.softmax(t.reshape(-1, W * H) / self.tau, dim=1)
            logsoft = torch.log_softmax(s.reshape(-1, W * H) / self.tau, dim=1)
            cost = torch.sum(soft_t * torch.log(soft_t) - soft_t * logsoft) * (self.tau ** 2)
            losses.append(cost / (C * N))
        return sum(losses)


class FeatureLoss(nn.Module):
    def __init__(self, channels_s, channels_t, distiller='cwd', loss_weight=1.0):
        super(FeatureLoss, self).__init__()
        self.loss_weight = loss_weight
        self.align_module = nn.ModuleList([
            nn.Conv2d(channel, tea_channel, kernel_size=1, stride=1, padding=0)
            for channel, tea_channel in zip(channels_s, channels_t)])
        self.norm = nn.ModuleList([nn.BatchNorm2d(tea_channel, affine=False) for tea_channel in channels_t])
        self.feature_loss = CWDLoss()

    def forward(self, y_s, y_t):
        tea_feats, stu_feats = [], []
        for idx, (s, t) in enumerate(zip(y_s, y_t)):
            s = self.align_module[idx](s)
            stu_feats.append(self.norm[idx](s))
            tea_feats.append(self.norm[idx](t.detach()))
        return self.loss_weight * self.feature_loss(stu_feats, tea_feats)


class Distillation_loss:
    def __init__(self, modeln, modelL, distiller="CWDLoss"):
        self.distiller = distiller
        self.distill_loss_fn = FeatureLoss(channels_s=[8], channels_t=[16], distiller=distiller[:3])
        self.modeln, self.modelL = modeln, modelL

    def get_loss(self, images):
        with torch.no_grad():
            t_feat = self.modelL[0](images)
        s_feat = self.modeln[0](images)
        return self.distill_loss_fn([s_feat], [t_feat])


class DetectionTrainer:
    def __init__(self, model, Distillation):
        self.model = model
        self.Distillation = Distillation

    def build_optimizer(self, model, lr=0.01, momentum=0.937):
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, nesterov=True)

    def _do_train(self, batches):
        self.optimizer = self.build_optimizer(model=self.model)  # ROOT
        self.d_loss = Distillation_loss(self.model, self.Distillation)
        for images, targets in batches:
            preds = self.model(images)
            self.loss = nn.functional.cross_entropy(preds, targets)
            self.loss += self.d_loss.get_loss(images)
            self.optimizer.zero_grad()
            self.loss.backward()
            self.optimizer.step()


torch.manual_seed(0)
student = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
teacher = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))
trainer = DetectionTrainer(student, teacher)
trainer._do_train([(torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2,))) for _ in range(3)])
