"""EfficientNet-PyTorch-3D's answer to "how to freeze layers" sets `m.requires_grad = False` on every module of the model and then `m.requires_grad = True` on the modules of the `_fc` head: `requires_grad` on an `nn.Module` is only a new plain attribute (the switch is `Module.requires_grad_()`), so no parameter is frozen, the optimizer built from the parameters that require grad still holds the whole backbone, and the "frozen" pretrained 3D convolutions are fine-tuned along with the head, with no error.

source: https://github.com/shijianjian/EfficientNet-PyTorch-3D/issues/8
kind: bug
symptom: silent
verified: after 10 fine-tuning steps the "frozen" stem convolution has moved by 0.0305 (max absolute change), the optimizer holds 9 of 9 parameter tensors and the stem weight still requires grad (True); in the look-alike the stem moves by 0 and the optimizer holds 2 of 9 tensors
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class TinyEfficientNet3D(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self._conv_stem = nn.Conv3d(1, 8, 3, stride=2, padding=1, bias=False)
        self._bn0 = nn.BatchNorm3d(8)
        self._blocks = nn.Sequential(nn.Conv3d(8, 8, 3, padding=1, groups=8), nn.SiLU(), nn.Conv3d(8, 16, 1))
        self._fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = nn.functional.silu(self._bn0(self._conv_stem(x)))
        x = self._blocks(x).mean((2, 3, 4))
        return self._fc(x)


def freeze_all_but_head(model):
    for m in model.modules():
        m.requires_grad = False  # ROOT
    for m in model._fc.modules():
        m.requires_grad = True


def fine_tune(model, volumes, labels, steps=10):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=3e-3)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(volumes), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return len(params)


model = TinyEfficientNet3D()
pretrained_stem = model._conv_stem.weight.detach().clone()
freeze_all_but_head(model)
volumes, labels = torch.randn(6, 1, 8, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2])
n_opt = fine_tune(model, volumes, labels)
moved = (model._conv_stem.weight - pretrained_stem).abs().max().item()
print(f"stem moved by {moved:.3g}; optimizer holds {n_opt} of {len(list(model.parameters()))} tensors; "
      f"stem requires_grad: {model._conv_stem.weight.requires_grad}")
