"""pytorch-cnn-visualizations vanilla backprop: preprocess_image wraps the normalized image in a new leaf with requires_grad=True once, so the gradient with respect to the input image is stored in its .grad.

source: https://github.com/utkuozbulak/pytorch-cnn-visualizations/pull/43
kind: lookalike
verified: prep_img.grad is a non-zero tensor of the image's shape after backward
"""
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable


def preprocess_image(pil_im):
    mean = [0.485, 0.456, 0.406]
    std = [0.229, 0.224, 0.225]
    im_as_arr = np.float32(pil_im).transpose(2, 0, 1) / 255
    for channel, _ in enumerate(im_as_arr):
        im_as_arr[channel] -= mean[channel]
        im_as_arr[channel] /= std[channel]
    im_as_ten = torch.from_numpy(im_as_arr).float()
    im_as_ten.unsqueeze_(0)
    im_as_var = Variable(im_as_ten, requires_grad=True)
    return im_as_var


class VanillaBackprop():
    def __init__(self, model):
        self.model = model
        self.model.eval()

    def generate_gradients(self, input_image, target_class):
        model_output = self.model(input_image)
        self.model.zero_grad()
        one_hot_output = torch.zeros(1, model_output.size()[-1])
        one_hot_output[0][target_class] = 1
        model_output.backward(gradient=one_hot_output)
        return input_image.grad.data.numpy()[0]


torch.manual_seed(0)
pretrained_model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
original_image = np.random.RandomState(0).randint(0, 255, (16, 16, 3)).astype(np.uint8)
prep_img = preprocess_image(original_image)
vanilla_grads = VanillaBackprop(pretrained_model).generate_gradients(prep_img, target_class=2)
print(vanilla_grads.shape, bool(np.abs(vanilla_grads).sum() > 0))
