"""ART's PyTorchObjectDetector after PR #2238: `_preprocess_and_convert_inputs` sets `requires_grad` only on a leaf input and calls `retain_grad()` on a computed one, so the adversarial patch, whose overlay reaches the detector as a non-leaf tensor, is optimized through the detector's losses.

source: https://github.com/Trusted-AI/adversarial-robustness-toolbox/pull/2238
kind: lookalike
"""
import numpy as np
import torch
from torch import nn


class TinyDetector(nn.Module):
    """Stands in for a torchvision detector: in train mode it returns a dict of losses."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Conv2d(3, 4, 3, padding=1)
        self.cls = nn.Linear(4, 3)
        self.box = nn.Linear(4, 4)

    def forward(self, images, targets):
        feats = self.backbone(images).mean(dim=(2, 3))
        labels = torch.stack([t["labels"][0] for t in targets])
        boxes = torch.stack([t["boxes"][0] for t in targets])
        return {
            "loss_classifier": nn.functional.cross_entropy(self.cls(feats), labels),
            "loss_box_reg": nn.functional.smooth_l1_loss(self.box(feats), boxes),
        }


class PyTorchObjectDetector:
    def __init__(self, model, clip_values=(0.0, 1.0), channels_first=True,
                 attack_losses=("loss_classifier", "loss_box_reg")):
        self._model = model
        self.clip_values = clip_values
        self.channels_first = channels_first
        self.attack_losses = attack_losses

    def _preprocess_and_convert_inputs(self, x, y, no_grad=True):
        norm_factor = self.clip_values[1] if self.clip_values is not None else 1.0
        x_tensor = x if isinstance(x, torch.Tensor) else torch.from_numpy(x)
        y_tensor = [{k: torch.as_tensor(v) for k, v in y_i.items()} for y_i in y]
        if not self.channels_first:
            x_tensor = torch.permute(x_tensor, (0, 3, 1, 2))
        x_tensor = x_tensor / norm_factor

        # Set gradients
        if not no_grad:
            if x_tensor.is_leaf:
                x_tensor.requires_grad = True
            else:
                x_tensor.retain_grad()
        return x_tensor, y_tensor

    def _get_losses(self, x, y):
        self._model.train()
        x_preprocessed, y_preprocessed = self._preprocess_and_convert_inputs(x=x, y=y, no_grad=False)
        loss_components = self._model(x_preprocessed, y_preprocessed)
        return loss_components, x_preprocessed

    def compute_loss(self, x, y):
        loss_components, _ = self._get_losses(x=x, y=y)
        loss = None
        for loss_name in self.attack_losses:
            loss = loss_components[loss_name] if loss is None else loss + loss_components[loss_name]
        if isinstance(x, torch.Tensor):
            return loss
        return loss.detach().cpu().numpy()


class AdversarialPatchPyTorch:
    def __init__(self, estimator, patch_shape=(3, 4, 4), learning_rate=0.1):
        self.estimator = estimator
        self._patch = torch.full(patch_shape, 0.5, requires_grad=True)
        self._optimizer = torch.optim.Adam([self._patch], lr=learning_rate)

    def _random_overlay(self, images, patch):
        padded = torch.zeros_like(images)
        padded[:, :, :4, :4] = patch
        mask = torch.zeros_like(images)
        mask[:, :, :4, :4] = 1.0
        return images * (1 - mask) + padded * mask

    def _train_step(self, images, target):
        self._optimizer.zero_grad()
        patched_input = self._random_overlay(images, self._patch)
        patched_input = torch.clamp(patched_input, min=self.estimator.clip_values[0],
                                    max=self.estimator.clip_values[1])
        loss = -self.estimator.compute_loss(x=patched_input, y=target)
        loss.backward()
        self._optimizer.step()
        return loss


torch.manual_seed(0)
detector = PyTorchObjectDetector(TinyDetector())
attack = AdversarialPatchPyTorch(detector)
images = torch.rand(2, 3, 8, 8)
targets = [{"boxes": np.array([[0.1, 0.1, 0.5, 0.5]], dtype=np.float32), "labels": np.array([1])}
           for _ in range(2)]
for step in range(3):
    loss = attack._train_step(images, targets)
    print(f"step {step}: patch loss {loss.item():.4f}")
