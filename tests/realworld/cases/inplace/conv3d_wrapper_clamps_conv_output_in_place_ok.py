"""Conv3d wrapper clamps its own conv output in place with torch.clamp_ to stay inside the fp16 range; conv's backward does not need its output.

source: https://github.com/pytorch/pytorch/issues/33373
kind: lookalike
"""
import torch
import torch.nn as nn

_conv3d = nn.Conv3d


class Conv3dWrapper(_conv3d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super(Conv3dWrapper, self).__init__(in_channels, out_channels, kernel_size, stride, padding)

    def forward(self, input):
        return torch.clamp_(super(Conv3dWrapper, self).forward(input), -65504, 65504)


torch.manual_seed(0)
model = nn.Sequential(Conv3dWrapper(1, 4, 3, padding=1), nn.ReLU(), Conv3dWrapper(4, 1, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(2, 1, 6, 6, 6), torch.randn(2, 1, 6, 6, 6)
loss = nn.functional.mse_loss(model(x), y)
optimizer.zero_grad()
loss.backward()
optimizer.step()
