"""GradCAM takes the top-class score with logit[:, idx].squeeze() and calls backward on it, one image at a time.

source: https://github.com/1Konny/gradcam_plus_plus-pytorch/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GradCAM:
    def __init__(self, model, target_layer):
        self.model_arch = model
        self.gradients, self.activations = {}, {}
        target_layer.register_forward_hook(lambda m, i, o: self.activations.__setitem__('value', o))
        target_layer.register_full_backward_hook(lambda m, gi, go: self.gradients.__setitem__('value', go[0]))

    def forward(self, input, class_idx=None, retain_graph=False):
        b, c, h, w = input.size()
        logit = self.model_arch(input)
        if class_idx is None:
            score = logit[:, logit.max(1)[-1]].squeeze()
        else:
            score = logit[:, class_idx].squeeze()
        self.model_arch.zero_grad()
        score.backward(retain_graph=retain_graph)
        gradients, activations = self.gradients['value'], self.activations['value']
        weights = gradients.view(b, gradients.size(1), -1).mean(2).view(b, -1, 1, 1)
        saliency_map = F.relu((weights * activations).sum(1, keepdim=True))
        return F.interpolate(saliency_map, size=(h, w), mode='bilinear', align_corners=False), logit

    def __call__(self, input, class_idx=None, retain_graph=False):
        return self.forward(input, class_idx, retain_graph)


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
model.eval()
gradcam = GradCAM(model, model[2])
inputs = torch.rand(4, 3, 16, 16)
masks = [gradcam(inputs[i:i + 1])[0] for i in range(inputs.size(0))]
print(torch.cat(masks).shape)
