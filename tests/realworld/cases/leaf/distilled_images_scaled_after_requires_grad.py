"""Synthetic images created with requires_grad and then scaled by 0.01: the optimizer refuses them.

source: https://github.com/pytorch/pytorch/issues/140469
kind: bug
symptom: crash
verified: can't optimize a non-leaf Tensor
"""
import torch

num_classes, ipc, channel, im_size = 2, 3, 1, (8, 8)
image_syn = torch.randn(size=(num_classes * ipc, channel, im_size[0], im_size[1]), dtype=torch.float, requires_grad=True) * 0.01  # ROOT
label_syn = torch.arange(num_classes).repeat_interleave(ipc)
optimizer_img = torch.optim.SGD([image_syn, ], lr=0.1, momentum=0.5)  # SYMPTOM
net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, num_classes))
for it in range(3):
    optimizer_img.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(image_syn), label_syn)
    loss.backward()
    optimizer_img.step()
