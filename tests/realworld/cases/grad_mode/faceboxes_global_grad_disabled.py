"""A face detector helper switches gradients off globally at import time; training the main model fails.

source: https://github.com/choyingw/SynergyNet/pull/22
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class FaceBoxes:
    """Detector used only to crop faces before the landmark network."""

    def __init__(self):
        self.net = nn.Conv2d(3, 4, 3, padding=1).eval()

    def __call__(self, img):
        scores = self.net(img).mean(dim=(2, 3))
        return scores.argmax(dim=1)


torch.set_grad_enabled(False)  # ROOT


class SynergyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(8, 62)

    def forward(self, x):
        return self.head(self.backbone(x))


face_boxes = FaceBoxes()
model = SynergyNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
imgs, params_gt = torch.randn(2, 3, 16, 16), torch.randn(2, 62)
face_boxes(imgs)
loss = nn.functional.mse_loss(model(imgs), params_gt)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
