"""sparseml pruning under PyTorch Lightning: the pruning modifier registers a gradient-masking hook on the weight of every prunable layer (param.register_hook), including the layers the user froze with requires_grad = False, and register_hook refuses a tensor that does not require grad.

source: https://github.com/neuralmagic/sparseml/issues/1438
kind: bug
symptom: crash
verified: cannot register a hook on a tensor that doesn't require gradient
"""
from functools import partial

import torch
import torch.nn as nn


class ModuleParamPruningMask:
    def __init__(self, layers, param_name="weight"):
        self._layers = layers
        self._params = [getattr(layer, param_name) for layer in layers]
        self._param_masks = [torch.ones_like(p) for p in self._params]
        self._gradient_hooks = [None for _ in self._params]
        self._create_hooks()

    def _hook_mask_gradient(self, idx, grad):
        return grad.mul_(self._param_masks[idx])

    def _create_hooks(self):
        for idx, (param, layer) in enumerate(zip(self._params, self._layers)):
            if self._gradient_hooks[idx] is None:
                self._gradient_hooks[idx] = param.register_hook(partial(self._hook_mask_gradient, idx))  # ROOT

    def set_param_masks(self, sparsity):
        for idx, param in enumerate(self._params):
            k = int(sparsity * param.numel())
            threshold = param.detach().abs().flatten().kthvalue(max(k, 1)).values
            self._param_masks[idx] = (param.detach().abs() > threshold).float()


class LitClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.backbone(x))


model = LitClassifier()
for p in model.backbone[0].parameters():  # keep the stem frozen
    p.requires_grad = False
prunable = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
mask = ModuleParamPruningMask(prunable)
mask.set_param_masks(0.5)
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
x, y = torch.randn(4, 3, 12, 12), torch.randint(0, 4, (4,))
loss = nn.functional.cross_entropy(model(x), y)
optimizer.zero_grad()
loss.backward()
optimizer.step()
