"""fast-neural-style's TransformerNet as published, ending in a convolution: utils.normalize_batch's in-place div_ on the stylized batch is harmless, since the convolution saved its input, not its output.

source: https://github.com/abhiskk/fast-neural-style/issues/12
kind: lookalike
verified: runs; the transformer gets gradients
"""
import torch
import torch.nn as nn


def normalize_batch(batch):
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


class ConvLayer(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1):
        super().__init__()
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = ConvLayer(3, 16, 3)
        self.in1 = nn.InstanceNorm2d(16, affine=True)
        self.relu = nn.ReLU()
        self.deconv3 = ConvLayer(16, 3, 3)

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.deconv3(y)
        return y


torch.manual_seed(0)
transformer = TransformerNet()
vgg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
for p in vgg.parameters():
    p.requires_grad = False
optimizer = torch.optim.Adam(transformer.parameters(), 1e-3)
mse_loss = nn.MSELoss()
x = torch.rand(2, 3, 32, 32) * 255
optimizer.zero_grad()
y = transformer(x)
y = normalize_batch(y)
x = normalize_batch(x)
features_y = vgg(y)
features_x = vgg(x)
content_loss = mse_loss(features_y, features_x)
content_loss.backward()
assert transformer.conv1.conv2d.weight.grad is not None
optimizer.step()
