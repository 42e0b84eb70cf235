"""lightly's ResNet-50 DINO benchmark passes freeze_last_layer=1 to the teacher's DINOProjectionHead instead of the student's: the training step cancels the gradients of self.student_projection_head's last layer during the first epoch, but that head was built with the default freeze_last_layer=-1, so cancel_last_layer_gradients returns at once and the student's last layer is updated from the first step (no error).

source: https://github.com/lightly-ai/lightly/pull/1596
kind: bug
symptom: silent
verified: in epoch 0 (3 SGD steps) the student head's last layer (weight_v) changes by 0.0798 (max abs) although the DINO recipe keeps it fixed for the first epoch; with freeze_last_layer=1 on the student head (the fix) it changes by 0.0
"""
import copy

import torch
from torch import nn


class DINOProjectionHead(nn.Module):  # lightly's ProjectionHead base inlined, the truncated-normal init left out
    def __init__(self, input_dim=32, hidden_dim=64, bottleneck_dim=16, output_dim=128, freeze_last_layer=-1,
                 norm_last_layer=True):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, hidden_dim),
                                    nn.GELU(), nn.Linear(hidden_dim, bottleneck_dim))
        self.freeze_last_layer = freeze_last_layer
        self.last_layer = nn.Linear(bottleneck_dim, output_dim, bias=False)
        self.last_layer = nn.utils.weight_norm(self.last_layer)
        self.last_layer.weight_g.data.fill_(1)
        if norm_last_layer:
            self.last_layer.weight_g.requires_grad = False

    def cancel_last_layer_gradients(self, current_epoch: int) -> None:
        """Cancel last layer gradients to stabilize the training."""
        if current_epoch >= self.freeze_last_layer:
            return
        for param in self.last_layer.parameters():
            param.grad = None

    def forward(self, x):
        x = self.layers(x)
        x = nn.functional.normalize(x, dim=-1, p=2)
        return self.last_layer(x)


class DINO(nn.Module):  # the LightningModule without the online classifier; a small MLP stands for the ResNet-50
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(48, 32), nn.ReLU())
        self.projection_head = DINOProjectionHead(freeze_last_layer=1)
        self.student_backbone = copy.deepcopy(self.backbone)
        self.student_projection_head = DINOProjectionHead()  # ROOT
        self.current_epoch = 0
        for p in list(self.backbone.parameters()) + list(self.projection_head.parameters()):
            p.requires_grad = False  # on_train_start: deactivate_requires_grad on the teacher

    def training_step(self, views):
        with torch.no_grad():
            teacher_out = [self.projection_head(self.backbone(v)) for v in views[:2]]
        student_out = [self.student_projection_head(self.student_backbone(v)) for v in views]
        loss = 0.0
        for i, t in enumerate(teacher_out):  # DINOLoss: teacher softmax (temperature 0.04) vs student log-softmax (0.1)
            for j, s in enumerate(student_out):
                if i != j:
                    loss = loss - (torch.softmax(t / 0.04, dim=-1) * torch.log_softmax(s / 0.1, dim=-1)).sum(-1).mean()
        return loss / (len(teacher_out) * (len(student_out) - 1))


torch.manual_seed(0)
model = DINO()
optimizer = torch.optim.SGD(list(model.student_backbone.parameters()) + list(model.student_projection_head.parameters()),
                            lr=0.03, momentum=0.9)
last_layer_before = model.student_projection_head.last_layer.weight_v.detach().clone()
for step in range(3):  # first epoch
    views = [torch.randn(8, 48) for _ in range(4)]
    loss = model.training_step(views)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 3.0)  # configure_gradient_clipping
    model.student_projection_head.cancel_last_layer_gradients(model.current_epoch)
    optimizer.step()
change = (model.student_projection_head.last_layer.weight_v - last_layer_before).abs().max().item()
print("epoch 0 loss", round(loss.item(), 4), "student last layer change (max abs):", change)
