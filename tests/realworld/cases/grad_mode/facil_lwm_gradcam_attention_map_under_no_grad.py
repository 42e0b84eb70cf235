"""FACIL LwM: the GradCAM attention map is computed under torch.no_grad, so the attention distillation loss is dead.

source: https://github.com/mmasana/FACIL/issues/37
kind: bug
symptom: silent
verified: attmap.requires_grad is False: the attention distillation term gives the model no gradient
"""
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F


class GradCAM:
    def __init__(self, model, layer):
        self.model, self.layer = model, layer

    def __enter__(self):
        def forward_hook(module, input, output):
            self.activations = output

        def backward_hook(module, grad_input, grad_output):
            self.gradients = grad_output[0].detach()
        self.fhandle = self.layer.register_forward_hook(forward_hook)
        self.bhandle = self.layer.register_full_backward_hook(backward_hook)
        return self

    def __exit__(self, *args):
        self.fhandle.remove()
        self.bhandle.remove()

    def __call__(self, input, return_outputs=False):
        model_output = self.model(input)
        class_indices = model_output.argmax(dim=1)
        score = model_output.gather(1, class_indices.unsqueeze(1)).sum()
        score.backward(retain_graph=True)
        with torch.no_grad():  # ROOT
            weights = F.adaptive_avg_pool2d(self.gradients, 1)
            att_map = (weights * self.activations).sum(dim=1, keepdim=True)
            att_map = F.relu(att_map)
        return (att_map, model_output) if return_outputs else att_map


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
model_old = copy.deepcopy(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
images, targets = torch.rand(4, 3, 8, 8), torch.randint(0, 5, (4,))
for step in range(2):
    with GradCAM(model_old, model_old[2]) as gradcam_old:
        attmap_old = gradcam_old(images)
    with GradCAM(model, model[2]) as gradcam:
        attmap, outputs = gradcam(images, return_outputs=True)
    loss_att = (F.normalize(attmap.flatten(1)) - F.normalize(attmap_old.flatten(1))).norm(p=1, dim=1).mean()
    loss = F.cross_entropy(outputs, targets) + 1.0 * loss_att
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
