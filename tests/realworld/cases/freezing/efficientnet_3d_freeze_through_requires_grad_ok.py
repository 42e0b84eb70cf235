"""EfficientNet-PyTorch-3D's layer freezing done through the parameters: `model.requires_grad_(False)` and then `model._fc.requires_grad_(True)` switch `requires_grad` on every parameter tensor, so the optimizer built from the parameters that require grad holds only the head and the pretrained 3D convolutions stay as loaded.

source: https://github.com/shijianjian/EfficientNet-PyTorch-3D/issues/8
kind: lookalike
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
    model.requires_grad_(False)
    model._fc.requires_grad_(True)


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
