"""Hopenet training passes torch.ones(1) as the gradient of each 0-dim loss to torch.autograd.backward.

source: https://github.com/natanielruiz/deep-head-pose/issues/124
kind: bug
symptom: crash
verified: RuntimeError: Mismatch in shape: grad_output[0] has a shape of torch.Size([1]) and output[0] has a shape of torch.Size([])
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Hopenet(nn.Module):
    def __init__(self, num_bins=6):
        super(Hopenet, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc_yaw, self.fc_pitch, self.fc_roll = nn.Linear(8, num_bins), nn.Linear(8, num_bins), nn.Linear(8, num_bins)

    def forward(self, x):
        x = self.features(x)
        return self.fc_yaw(x), self.fc_pitch(x), self.fc_roll(x)


torch.manual_seed(0)
model = Hopenet()
criterion = nn.CrossEntropyLoss()
reg_criterion = nn.MSELoss()
idx_tensor = torch.arange(6, dtype=torch.float)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)
alpha = 0.001
images = torch.randn(4, 3, 8, 8)
labels = torch.randint(0, 6, (4, 3))
cont_labels = labels.float() * 3 - 99
yaw, pitch, roll = model(images)
losses = []
for i, pred in enumerate((yaw, pitch, roll)):
    loss_cls = criterion(pred, labels[:, i])
    predicted = torch.sum(F.softmax(pred, dim=1) * idx_tensor, 1) * 3 - 99
    losses.append(loss_cls + alpha * reg_criterion(predicted, cont_labels[:, i]))
loss_seq = losses
grad_seq = [torch.ones(1) for _ in range(len(loss_seq))]  # ROOT
optimizer.zero_grad()
torch.autograd.backward(loss_seq, grad_seq)  # SYMPTOM
optimizer.step()
