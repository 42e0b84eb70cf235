"""Hair segmentation adds an image-gradient consistency loss computed on pred.argmax(1), which carries no gradient.

source: https://github.com/wonbeomjang/mobile-hair-segmentation-pytorch/issues/3
kind: bug
symptom: silent
verified: the gradient of the total loss equals that of the BCE term alone (max abs difference 0.0): the ImageGradientLoss term adds nothing; with pred[:, 1] it changes the gradient
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ImageGradientLoss(nn.Module):
    def __init__(self):
        super().__init__()
        kx = torch.tensor([[[[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]]])
        self.register_buffer("kx", kx)
        self.register_buffer("ky", kx.transpose(2, 3))

    def forward(self, pred, image):
        size = pred.size()
        pred = pred.argmax(1).view(size[0], 1, size[2], size[3]).float()  # ROOT
        gray = image.mean(1, keepdim=True)
        g_img = torch.sqrt(F.conv2d(gray, self.kx, padding=1) ** 2 + F.conv2d(gray, self.ky, padding=1) ** 2 + 1e-6)
        g_pred = torch.sqrt(F.conv2d(pred, self.kx, padding=1) ** 2 + F.conv2d(pred, self.ky, padding=1) ** 2 + 1e-6)
        return (g_pred * (1 - g_img ** 2)).sum() / g_pred.sum().clamp(min=1e-6)


class MobileHairNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 3, padding=1))

    def forward(self, x):
        return self.body(x)


torch.manual_seed(0)
net = MobileHairNet()
criterion_bce = nn.CrossEntropyLoss()
criterion_grad = ImageGradientLoss()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
image, mask = torch.rand(4, 3, 16, 16), torch.randint(0, 2, (4, 16, 16))
for step in range(3):
    pred = net(image)
    loss = criterion_bce(pred, mask) + 0.5 * criterion_grad(pred, image)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
