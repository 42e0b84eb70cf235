"""PIXIE's Visualizer converts the predicted vertices and camera with `.cpu().numpy()` to draw them; when the prediction was run with gradients enabled (as in fitting) those tensors require grad and the conversion fails (the PR adds `.detach()`).

source: https://github.com/yfeng95/PIXIE/pull/31
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
"""
import numpy as np
import torch
import torch.nn as nn


class PIXIE(nn.Module):
    def __init__(self, n_vertices=50, n_shape=10):
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 64), nn.ReLU())
        self.shape_head = nn.Linear(64, n_shape)
        self.cam_head = nn.Linear(64, 3)
        self.shapedirs = nn.Parameter(torch.randn(n_vertices, 3, n_shape) * 0.01, requires_grad=False)
        self.v_template = nn.Parameter(torch.randn(n_vertices, 3), requires_grad=False)

    def forward(self, image):
        feat = self.encoder(image)
        shape, cam = self.shape_head(feat), self.cam_head(feat)
        vertices = self.v_template + torch.einsum('vck,bk->bvc', self.shapedirs, shape)
        return {'vertices': vertices, 'cam': cam}


class Visualizer:
    def __init__(self, image_size=16):
        self.image_size = image_size

    def render_results(self, opdict, image):
        vertices = opdict['vertices'][0].cpu().numpy()  # ROOT
        cam = opdict['cam'][0].cpu().numpy()
        trans_verts = vertices[:, :2] * cam[0] + cam[1:]
        pixels = np.clip(((trans_verts + 1) * self.image_size / 2).astype(int), 0, self.image_size - 1)
        canvas = image[0].permute(1, 2, 0).cpu().numpy().copy()
        canvas[pixels[:, 1], pixels[:, 0]] = [1.0, 0.0, 0.0]
        return canvas


torch.manual_seed(0)
pixie = PIXIE()
visualizer = Visualizer()
image = torch.rand(1, 3, 16, 16)
opdict = pixie(image)
loss = opdict['vertices'].pow(2).mean()
loss.backward()
shape_image = visualizer.render_results(opdict, image)  # SYMPTOM
