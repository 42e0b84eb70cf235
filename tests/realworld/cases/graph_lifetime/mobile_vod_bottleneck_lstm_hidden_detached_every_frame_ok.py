"""The mobile-vod-bottleneck-lstm training loop with the fix from the thread: net.detach_hidden() moves into the inner loop (after each frame's step), so the next frame's LSTM state starts a new graph and each backward only runs through its own frame.

source: https://github.com/vikrant7/mobile-vod-bottleneck-lstm/issues/25
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BottleneckLSTMCell(nn.Module):
    def __init__(self, input_channels, hidden_channels):
        super().__init__()
        self.W = nn.Conv2d(input_channels, input_channels, 3, padding=1, groups=input_channels)
        self.Wy = nn.Conv2d(input_channels + hidden_channels, hidden_channels, 1)
        self.Wi = nn.Conv2d(hidden_channels, hidden_channels, 3, padding=1, groups=hidden_channels)
        self.Wbi = nn.Conv2d(hidden_channels, 4 * hidden_channels, 1)

    def forward(self, x, h, c):
        x = self.W(x)
        y = torch.cat((x, h), 1)
        i = self.Wy(y)
        b = self.Wi(i)
        ci, cf, cc, co = self.Wbi(b).chunk(4, 1)
        c = torch.sigmoid(cf) * c + torch.sigmoid(ci) * F.relu6(cc)
        h = torch.sigmoid(co) * F.relu6(c)
        return h, c


class MobileVOD(nn.Module):
    def __init__(self, num_classes=4, hidden=16):
        super().__init__()
        self.base = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU6())
        self.lstm = BottleneckLSTMCell(16, hidden)
        self.classification_header = nn.Conv2d(hidden, num_classes, 1)
        self.regression_header = nn.Conv2d(hidden, 4, 1)
        self.hidden_channels = hidden
        self.hidden_state = self.cell_state = None

    def forward(self, x):
        x = self.base(x)
        if self.hidden_state is None:
            self.hidden_state = x.new_zeros(x.shape[0], self.hidden_channels, x.shape[2], x.shape[3])
            self.cell_state = torch.zeros_like(self.hidden_state)
        self.hidden_state, self.cell_state = self.lstm(x, self.hidden_state, self.cell_state)
        return self.classification_header(self.hidden_state), self.regression_header(self.hidden_state)

    def detach_hidden(self):
        if self.hidden_state is not None:
            self.hidden_state = self.hidden_state.detach()
            self.cell_state = self.cell_state.detach()


torch.manual_seed(0)
net = MobileVOD()
optimizer = torch.optim.RMSprop(net.parameters(), lr=1e-3)
videos = [torch.randn(4, 2, 3, 32, 32) for _ in range(2)]  # (frames, batch, C, H, W)
for i, video in enumerate(videos):
    running_classification_loss = 0.0
    for images in video:
        labels, boxes = torch.randint(0, 4, (2, 16, 16)), torch.randn(2, 4, 16, 16)
        optimizer.zero_grad()
        confidence, locations = net(images)
        regression_loss = F.smooth_l1_loss(locations, boxes)
        classification_loss = F.cross_entropy(confidence, labels)
        loss = regression_loss + classification_loss
        loss.backward()
        optimizer.step()
        running_classification_loss += classification_loss.item()
        net.detach_hidden()
    print(i, running_classification_loss)
