"""ViP train.py with the guard proposed in the issue: the pseudo-batch rescaling skips parameters whose grad is None (the pitch and roll heads when only yaw is regressed).

source: https://github.com/MichiganCOG/ViP/issues/21
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class HeadPoseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc_yaw = nn.Linear(8, 1)
        self.fc_pitch = nn.Linear(8, 1)
        self.fc_roll = nn.Linear(8, 1)

    def forward(self, x):
        f = self.features(x)
        return self.fc_yaw(f), self.fc_pitch(f), self.fc_roll(f)


args = {'psuedo_batch_loop': 2, 'batch_size': 4, 'lr': 0.01}
torch.manual_seed(0)
model = HeadPoseNet()
optimizer = torch.optim.SGD(model.parameters(), lr=args['lr'])
train_loader = [(torch.randn(4, 3, 16, 16), torch.randn(4, 3)) for _ in range(4)]
optimizer.zero_grad()
for step, (x_input, y_label) in enumerate(train_loader):
    yaw, pitch, roll = model(x_input)
    loss = F.mse_loss(yaw.squeeze(1), y_label[:, 0])
    loss = loss * args['batch_size']
    loss.backward()
    if (step + 1) % args['psuedo_batch_loop'] == 0:
        for param in model.parameters():
            if param.grad is not None:
                param.grad *= 1. / float(args['psuedo_batch_loop'] * args['batch_size'])
        optimizer.step()
        optimizer.zero_grad()
