"""pytorch-cnn-visualizations' CNNLayerVisualization optimizes the input image itself: processed_image is created as a leaf that requires grad and handed to Adam, so each step's backward of -mean(filter activation) updates it (the maintainer's answer to "the processed image is not changed").

source: https://github.com/utkuozbulak/pytorch-cnn-visualizations/issues/19
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
from torch.optim import Adam


def preprocess_image(pil_im, resize_im=True):
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    im_as_arr = np.float32(pil_im).transpose(2, 0, 1) / 255.0
    for channel, _ in enumerate(im_as_arr):
        im_as_arr[channel] -= mean[channel]
        im_as_arr[channel] /= std[channel]
    im_as_ten = torch.from_numpy(im_as_arr).float().unsqueeze_(0)
    return im_as_ten.requires_grad_(True)


class CNNLayerVisualization():
    def __init__(self, model, selected_layer, selected_filter):
        self.model = model
        self.model.eval()
        self.selected_layer = selected_layer
        self.selected_filter = selected_filter
        self.conv_output = 0

    def hook_layer(self):
        def hook_function(module, grad_in, grad_out):
            self.conv_output = grad_out[0, self.selected_filter]
        self.model[self.selected_layer].register_forward_hook(hook_function)

    def visualise_layer_with_hooks(self, steps=10):
        self.hook_layer()
        random_image = np.uint8(np.random.uniform(150, 180, (32, 32, 3)))
        self.processed_image = preprocess_image(random_image, False)
        start = self.processed_image.detach().clone()
        optimizer = Adam([self.processed_image], lr=0.1, weight_decay=1e-6)
        for i in range(1, steps):
            optimizer.zero_grad()
            x = self.processed_image
            for index, layer in enumerate(self.model):
                x = layer(x)
                if index == self.selected_layer:
                    break
            loss = -torch.mean(self.conv_output)
            loss.backward()
            optimizer.step()
        return (self.processed_image - start).abs().max().item()


torch.manual_seed(0)
np.random.seed(0)
pretrained_model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
layer_vis = CNNLayerVisualization(pretrained_model, selected_layer=2, selected_filter=5)
print(layer_vis.visualise_layer_with_hooks())
