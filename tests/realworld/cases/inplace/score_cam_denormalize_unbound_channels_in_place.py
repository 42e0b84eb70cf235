"""Score-CAM visualization: the input image requires grad (its gradient is the saliency), and denormalize iterates `for channel, mean, std in zip(denormalized[0], ...)` and calls channel.mul_(std).add_(mean); the channels are outputs of unbind, which autograd does not allow to be modified in place.

source: https://github.com/haofanwang/Score-CAM/issues/28
kind: bug
symptom: crash
verified: is a view and is being modified inplace. This view is the output of a function that returns multiple views
"""
import torch
import torch.nn as nn


def denormalize(tensor):
    means = [0.485, 0.456, 0.406]
    stds = [0.229, 0.224, 0.225]
    denormalized = tensor.clone()
    for channel, mean, std in zip(denormalized[0], means, stds):
        channel.mul_(std).add_(mean)  # ROOT
    return denormalized


def format_for_plotting(tensor):
    return tensor.squeeze(0).permute(1, 2, 0).detach()


def basic_visualize(input_, gradients):
    input_ = format_for_plotting(denormalize(input_))  # SYMPTOM
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
