"""Grad-CAM extractor registers a tensor hook on the target layer's output while the model runs with gradients enabled.

source: https://github.com/frgfm/torch-cam/issues/217
kind: lookalike
"""
import torch
import torch.nn as nn


class SmoothGradCAMpp:
    def __init__(self, model, target_layer):
        self.model = model
        self.hook_a, self.hook_g = None, None
        target_layer.register_forward_hook(self._hook_a)

    def _hook_a(self, module, input, output):
        self.hook_a = output.detach()
        output.register_hook(self._store_grad)

    def _store_grad(self, grad):
        self.hook_g = grad

    def __call__(self, class_idx, scores):
        scores[:, class_idx].sum().backward(retain_graph=True)
        weights = self.hook_g.mean(dim=(2, 3), keepdim=True)
        return torch.relu((weights * self.hook_a).sum(1))


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
model.eval()
cam_extractor = SmoothGradCAMpp(model, target_layer=model[2])
input = torch.rand(1, 3, 16, 16)
output = model(input)
activate_map = cam_extractor(output.argmax(1).item(), output)
print(activate_map.shape)
