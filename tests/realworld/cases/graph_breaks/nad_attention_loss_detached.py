"""Neural Attention Distillation: the attention-transfer term is detached, so only cls_loss trains.

source: https://github.com/bboylyg/NAD/issues/8
kind: bug
symptom: silent
verified: the student's gradient is identical with and without the attention term
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class AT(nn.Module):
    def __init__(self, p=2):
        super().__init__()
        self.p = p

    def attention_map(self, fm, eps=1e-6):
        am = torch.pow(torch.abs(fm), self.p).sum(dim=1, keepdim=True)
        return am / (am.flatten(1).norm(dim=1).view(-1, 1, 1, 1) + eps)

    def forward(self, fm_s, fm_t):
        return F.mse_loss(self.attention_map(fm_s), self.attention_map(fm_t))


class VGG(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.classifier = nn.Linear(4, 10)

    def forward(self, x):
        return self.classifier(self.features(x).mean(dim=(2, 3)))


snet, tnet = VGG(), VGG().eval()
criterionCls, criterionAT = nn.CrossEntropyLoss(), AT()
optimizer = torch.optim.SGD(snet.parameters(), lr=0.1)
beta3 = 5000
inputs, labels = torch.randn(2, 3, 8, 8), torch.tensor([1, 3])
output_s = snet(inputs)
activation3_s = snet.features(inputs)
activation3_t = tnet.features(inputs)
cls_loss = criterionCls(output_s, labels)
at3_loss = criterionAT(activation3_s, activation3_t).detach() * beta3  # ROOT
at_loss = at3_loss + cls_loss
optimizer.zero_grad()
at_loss.backward()
optimizer.step()
print(at3_loss.requires_grad)
