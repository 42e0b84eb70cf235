"""YOLOv3 training loop: total_loss += loss keeps every batch's graph alive for the whole epoch.

source: https://github.com/bubbliiiing/yolo3-pytorch/issues/3
kind: bug
symptom: silent
verified: total_loss still has a grad_fn after the epoch (each batch's graph is kept)
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class YoloLoss(nn.Module):
    def forward(self, output, targets):
        return ((output - targets) ** 2).mean()


net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LeakyReLU(0.1), nn.Conv2d(8, 5, 1))
yolo_loss = YoloLoss()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
gen = [(torch.randn(2, 3, 8, 8), torch.randn(2, 5, 8, 8)) for _ in range(4)]


def fit_one_epoch(net, yolo_loss, epoch_step, gen):
    total_loss = 0
    for iteration, (images, targets) in enumerate(gen):
        if iteration >= epoch_step:
            break
        optimizer.zero_grad()
        outputs = net(images)
        loss = yolo_loss(outputs, targets)
        loss.backward()
        optimizer.step()
        total_loss += loss  # ROOT
    return total_loss


total = fit_one_epoch(net, yolo_loss, len(gen), gen)
print(total.grad_fn)
