"""Hopenet's joint backward with the fix from the thread: grad_seq holds 0-dim ones (torch.tensor(1.0)), matching the 0-dim losses, so torch.autograd.backward(loss_seq, grad_seq) backpropagates the sum of the three losses.

source: https://github.com/natanielruiz/deep-head-pose/issues/85
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Hopenet(nn.Module):
    def __init__(self, num_bins=66):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc_yaw = nn.Linear(8, num_bins)
        self.fc_pitch = nn.Linear(8, num_bins)
        self.fc_roll = nn.Linear(8, num_bins)

    def forward(self, x):
        x = self.features(x).flatten(1)
        return self.fc_yaw(x), self.fc_pitch(x), self.fc_roll(x)


torch.manual_seed(0)
model = Hopenet()
criterion = nn.CrossEntropyLoss()
reg_criterion = nn.MSELoss()
softmax = nn.Softmax(dim=1)
idx_tensor = torch.arange(66, dtype=torch.float32)
alpha = 0.001
optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)

for i in range(2):
    images = torch.randn(4, 3, 32, 32)
    labels = torch.randint(0, 66, (4, 3))
    cont_labels = labels.float() * 3 - 99 + torch.rand(4, 3)
    label_yaw, label_pitch, label_roll = labels[:, 0], labels[:, 1], labels[:, 2]
    label_yaw_cont, label_pitch_cont, label_roll_cont = cont_labels[:, 0], cont_labels[:, 1], cont_labels[:, 2]

    yaw, pitch, roll = model(images)
    loss_yaw = criterion(yaw, label_yaw)
    loss_pitch = criterion(pitch, label_pitch)
    loss_roll = criterion(roll, label_roll)
    yaw_predicted = torch.sum(softmax(yaw) * idx_tensor, 1) * 3 - 99
    pitch_predicted = torch.sum(softmax(pitch) * idx_tensor, 1) * 3 - 99
    roll_predicted = torch.sum(softmax(roll) * idx_tensor, 1) * 3 - 99
    loss_reg_yaw = reg_criterion(yaw_predicted, label_yaw_cont)
    loss_reg_pitch = reg_criterion(pitch_predicted, label_pitch_cont)
    loss_reg_roll = reg_criterion(roll_predicted, label_roll_cont)
    loss_yaw += alpha * loss_reg_yaw
    loss_pitch += alpha * loss_reg_pitch
    loss_roll += alpha * loss_reg_roll

    loss_seq = [loss_yaw, loss_pitch, loss_roll]
    grad_seq = [torch.tensor(1.0) for _ in range(len(loss_seq))]
    optimizer.zero_grad()
    torch.autograd.backward(loss_seq, grad_seq)
    optimizer.step()
    print(i, loss_yaw.item(), loss_pitch.item(), loss_roll.item())
