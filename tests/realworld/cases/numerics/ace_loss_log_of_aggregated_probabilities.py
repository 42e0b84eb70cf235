"""Aggregation Cross-Entropy: torch.log of the aggregated softmax scores is -inf for a class that never fires.

source: https://github.com/summerlvsong/Aggregation-Cross-Entropy/issues/2
kind: bug
symptom: silent
verified: the loss is nan and every recognizer weight becomes nan after the step
"""
import torch
import torch.nn as nn


class ACE(nn.Module):
    def __init__(self, dictionary):
        super(ACE, self).__init__()
        self.softmax = None
        self.label = None
        self.dict = dictionary

    def forward(self, input, label):
        self.bs, self.h, self.w, _ = input.size()
        T_ = self.h * self.w
        input = input.view(self.bs, T_, -1)
        self.label = label
        self.label[:, 0] = T_ - self.label[:, 0]
        input = torch.sum(input, 1)
        input = input / T_
        label = label / T_
        loss = (-torch.sum(torch.log(input) * label)) / self.bs  # ROOT
        return loss


class Recognizer(nn.Module):
    def __init__(self, n_class):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.cls = nn.Conv2d(8, n_class, 1)

    def forward(self, x):
        logits = self.cls(torch.relu(self.conv(x))) * 10000
        return torch.softmax(logits.permute(0, 2, 3, 1), dim=-1)


torch.manual_seed(0)
n_class = 6
model = Recognizer(n_class)
criterion = ACE(dictionary=list(range(n_class)))
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
images = torch.rand(2, 1, 4, 6)
label = torch.zeros(2, n_class)
label[0, 1], label[0, 3], label[1, 2] = 2, 1, 3
label[:, 0] = label[:, 1:].sum(1)
out = model(images)
loss = criterion(out, label.clone())
optimizer.zero_grad()
loss.backward()
optimizer.step()
