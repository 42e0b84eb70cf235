"""CannyEdgePytorch's Net accumulates the edge magnitude with grad_mag += torch.sqrt(...): the in-place add overwrites the first square root's output, which SqrtBackward saved, so using the Canny net as a differentiable edge loss for a generator fails in backward (scipy's gaussian window is inlined).

source: https://github.com/DCurro/CannyEdgePytorch/issues/5
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import numpy as np
import torch
import torch.nn as nn


def gaussian(M, std):
    n = np.arange(0, M) - (M - 1.0) / 2.0
    return np.exp(-n ** 2 / (2 * std * std))


class Net(nn.Module):
    def __init__(self, threshold=10.0):
        super(Net, self).__init__()
        self.threshold = threshold
        filter_size = 5
        generated_filters = gaussian(filter_size, std=1.0).reshape([1, filter_size])
        self.gaussian_filter_horizontal = nn.Conv2d(1, 1, kernel_size=(1, filter_size), padding=(0, filter_size // 2))
        self.gaussian_filter_horizontal.weight.data.copy_(torch.from_numpy(generated_filters))
        self.gaussian_filter_horizontal.bias.data.copy_(torch.from_numpy(np.array([0.0])))
        self.gaussian_filter_vertical = nn.Conv2d(1, 1, kernel_size=(filter_size, 1), padding=(filter_size // 2, 0))
        self.gaussian_filter_vertical.weight.data.copy_(torch.from_numpy(generated_filters.T))
        self.gaussian_filter_vertical.bias.data.copy_(torch.from_numpy(np.array([0.0])))
        sobel_filter = np.array([[1, 0, -1], [2, 0, -2], [1, 0, -1]])
        self.sobel_filter_horizontal = nn.Conv2d(1, 1, kernel_size=sobel_filter.shape, padding=sobel_filter.shape[0] // 2)
        self.sobel_filter_horizontal.weight.data.copy_(torch.from_numpy(sobel_filter))
        self.sobel_filter_horizontal.bias.data.copy_(torch.from_numpy(np.array([0.0])))
        self.sobel_filter_vertical = nn.Conv2d(1, 1, kernel_size=sobel_filter.shape, padding=sobel_filter.shape[0] // 2)
        self.sobel_filter_vertical.weight.data.copy_(torch.from_numpy(sobel_filter.T))
        self.sobel_filter_vertical.bias.data.copy_(torch.from_numpy(np.array([0.0])))

    def forward(self, img):
        img_r, img_g, img_b = torch.split(img, 1, dim=1)
        blurred_img_r = self.gaussian_filter_vertical(self.gaussian_filter_horizontal(img_r))
        blurred_img_g = self.gaussian_filter_vertical(self.gaussian_filter_horizontal(img_g))
        blurred_img_b = self.gaussian_filter_vertical(self.gaussian_filter_horizontal(img_b))
        grad_x_r = self.sobel_filter_horizontal(blurred_img_r)
        grad_y_r = self.sobel_filter_vertical(blurred_img_r)
        grad_x_g = self.sobel_filter_horizontal(blurred_img_g)
        grad_y_g = self.sobel_filter_vertical(blurred_img_g)
        grad_x_b = self.sobel_filter_horizontal(blurred_img_b)
        grad_y_b = self.sobel_filter_vertical(blurred_img_b)
        # COMPUTE THICK EDGES
        grad_mag = torch.sqrt(grad_x_r ** 2 + grad_y_r ** 2)
        grad_mag += torch.sqrt(grad_x_g ** 2 + grad_y_g ** 2)  # ROOT
        grad_mag += torch.sqrt(grad_x_b ** 2 + grad_y_b ** 2)
        grad_orientation = (torch.atan2(grad_y_r + grad_y_g + grad_y_b, grad_x_r + grad_x_g + grad_x_b) * (180.0 / 3.14159))
        grad_orientation += 180.0
        return grad_mag, grad_orientation


torch.manual_seed(0)
canny = Net().requires_grad_(False)
generator = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Sigmoid())
optimizer = torch.optim.Adam(generator.parameters(), lr=1e-3)
for step in range(3):
    inputs, targets = torch.rand(2, 3, 24, 24), torch.rand(2, 3, 24, 24)
    edges_fake, _ = canny(generator(inputs))
    edges_real, _ = canny(targets)
    edge_loss = nn.functional.l1_loss(edges_fake, edges_real)
    optimizer.zero_grad()
    edge_loss.backward()  # SYMPTOM
    optimizer.step()
print(step, edge_loss.item())
