"""Synthetic images scaled first and only then marked requires_grad: a leaf the optimizer can train.

source: https://github.com/pytorch/pytorch/issues/140469
kind: lookalike
verified: image_syn.grad is set and the images change
"""
import torch

num_classes, ipc, channel, im_size = 2, 3, 1, (8, 8)
image_syn = (torch.randn(size=(num_classes * ipc, channel, im_size[0], im_size[1])) * 0.01).requires_grad_(True)
label_syn = torch.arange(num_classes).repeat_interleave(ipc)
optimizer_img = torch.optim.SGD([image_syn, ], lr=0.1, momentum=0.5)
net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, num_classes))
for it in range(3):
    optimizer_img.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(image_syn), label_syn)
    loss.backward()
    optimizer_img.step()
print(image_syn.grad.abs().sum() > 0)
