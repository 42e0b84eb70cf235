"""Score-CAM visualization with the thread's fix: denormalize writes each channel back by index with out-of-place mul and add (denormalized[0][count] = denormalized[0][count].mul(std)), so no output of unbind is modified in place.

source: https://github.com/haofanwang/Score-CAM/issues/28
kind: lookalike
verified: prints torch.Size([32, 32, 3]) torch.Size([32, 32])
"""
import torch
import torch.nn as nn


def denormalize(tensor):
    means = [0.485, 0.456, 0.406]
    stds = [0.229, 0.224, 0.225]
    denormalized = tensor.clone()
    count = 0
    for channel, mean, std in zip(denormalized[0], means, stds):
        denormalized[0][count] = denormalized[0][count].mul(std)
        denormalized[0][count] = denormalized[0][count].add(mean)
        count += 1
    return denormalized


def format_for_plotting(tensor):
    return tensor.squeeze(0).permute(1, 2, 0).detach()


def basic_visualize(input_, gradients):
    input_ = format_for_plotting(denormalize(input_))
    saliency = gradients.abs().amax(dim=1)[0]
    return input_, saliency


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
model.eval()
input_ = torch.randn(1, 3, 32, 32).requires_grad_()
score = model(input_)[0, 2]
score.backward()
image, saliency = basic_visualize(input_, input_.grad)
print(image.shape, saliency.shape)
