"""Visualising AlexNet's convolution kernels with torchvision's make_grid(normalize=True, scale_each=True): the kernels are slices of the weight Parameter, so the clone make_grid takes still requires grad, and its per-image loop normalises the views that iterating the tensor (unbind) returns in place, which autograd forbids.

source: https://github.com/pytorch/vision/issues/3025
kind: bug
symptom: crash
verified: RuntimeError: Output 0 of Unbind is a view and is being modified inplace. This view is the output of a function that returns multiple views.
"""
import torch
import torch.nn as nn


def make_grid(tensor, nrow=8, padding=2, normalize=False, scale_each=False, pad_value=0.0):
    # torchvision.utils.make_grid (0.8), cut down to the normalize/scale_each path
    if tensor.dim() == 4 and tensor.size(1) == 1:
        tensor = torch.cat((tensor, tensor, tensor), 1)
    if normalize is True:
        tensor = tensor.clone()  # avoid modifying tensor in-place

        def norm_ip(img, low, high):
            img.clamp_(min=low, max=high)  # SYMPTOM
            img.sub_(low).div_(max(high - low, 1e-5))

        def norm_range(t):
            norm_ip(t, float(t.min()), float(t.max()))

        if scale_each is True:
            for t in tensor:  # loop over mini-batch dimension
                norm_range(t)
        else:
            norm_range(tensor)
    nmaps = tensor.size(0)
    xmaps = min(nrow, nmaps)
    ymaps = (nmaps + xmaps - 1) // xmaps
    height, width = tensor.size(2) + padding, tensor.size(3) + padding
    grid = tensor.new_full((3, height * ymaps + padding, width * xmaps + padding), pad_value)
    k = 0
    for y in range(ymaps):
        for x in range(xmaps):
            if k >= nmaps:
                break
            grid.narrow(1, y * height + padding, height - padding).narrow(
                2, x * width + padding, width - padding).copy_(tensor[k])
            k = k + 1
    return grid


class AlexNetFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(16, 32, kernel_size=5, padding=2), nn.ReLU(inplace=True))


torch.manual_seed(0)
alexnet = AlexNetFeatures()
for sub_module in alexnet.modules():
    if isinstance(sub_module, nn.Conv2d):
        kernels = sub_module.weight  # ROOT
        c_out, c_int, k_w, k_h = tuple(kernels.shape)
        for o_idx in range(c_out):
            kernel_idx = kernels[o_idx, :, :, :].unsqueeze(1)
            img_grid = make_grid(kernel_idx, normalize=True, scale_each=True, nrow=3)
print(img_grid.shape)
