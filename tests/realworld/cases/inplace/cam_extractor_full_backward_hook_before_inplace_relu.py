"""torch-cam on DenseNet-like models: a full backward hook on a layer whose output the next ReLU(inplace=True) edits.

source: https://github.com/pytorch/pytorch/issues/61519
kind: bug
symptom: crash
verified: is a view and is being modified inplace
"""
import torch
from torch import nn


class GradCAMExtractor:
    def __init__(self, model, target_layer):
        self.model = model
        self.hook_a, self.hook_g = None, None
        target_layer.register_forward_hook(self._hook_a)
        target_layer.register_full_backward_hook(self._hook_g)  # ROOT

    def _hook_a(self, module, input, output):
        self.hook_a = output.data

    def _hook_g(self, module, grad_input, grad_output):
        self.hook_g = grad_output[0].data

    def __call__(self, class_idx, scores):
        self.model.zero_grad()
        scores[:, class_idx].sum().backward()
        weights = self.hook_g.mean(dim=(2, 3), keepdim=True)
        return torch.relu((weights * self.hook_a).sum(1))


torch.manual_seed(0)
mod = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                    nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
cam = GradCAMExtractor(mod, mod[2])
inp = torch.rand((1, 3, 16, 16))
scores = mod(inp)  # SYMPTOM
activation_map = cam(class_idx=1, scores=scores)
