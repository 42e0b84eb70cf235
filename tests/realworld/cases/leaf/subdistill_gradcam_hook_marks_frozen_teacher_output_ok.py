"""subdistill's Grad-CAM forward hook after its fix: when the intercepted output does not require grad (the frozen teacher on plain images), the hook first makes it a leaf that requires grad with `output.requires_grad_(True)` and only then calls `retain_grad()`; the teacher's logits now depend on it, `logits.sum().backward()` fills its `.grad`, and the CAM targets are built for the student every step.

source: https://github.com/p16i/subdistill/commit/e3dbbe4a975af9d2c86f1c738c7e40c2a1e23a97
kind: lookalike
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)

ATTRIBUTE_INTERCEPTED_OUTPUT = "__output"


def attach_hook_intercept_module(module, should_retain_grad, detach_output):
    def fh(mod, input, output):
        setattr(mod, ATTRIBUTE_INTERCEPTED_OUTPUT, output)
        if should_retain_grad:
            if not output.requires_grad:
                output.requires_grad_(True)
            output.retain_grad()
        if detach_output:
            return output.detach()

    return module, module.register_forward_hook(fh)


def get_output(module):
    output = getattr(module, ATTRIBUTE_INTERCEPTED_OUTPUT)
    delattr(module, ATTRIBUTE_INTERCEPTED_OUTPUT)
    return output


def teacher_cam(model, layer, x, y, num_classes=10):
    """Grad-CAM of the frozen teacher: the explanation the student is trained to match."""
    _, hook = attach_hook_intercept_module(layer, should_retain_grad=True, detach_output=False)
    try:
        logits = model(x) * F.one_hot(y, num_classes=num_classes)
        logits.sum().backward()
        output = get_output(layer)
        cam = F.relu((output * output.grad.mean(dim=(2, 3), keepdim=True)).sum(dim=1))
    finally:
        hook.remove()
    return cam.detach()


class Student(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, 2 * width, 3, 2, 1),
                                      nn.ReLU())
        self.fc = nn.Linear(2 * width, 10)

    def forward(self, x):
        feats = self.features(x)
        return self.fc(feats.mean(dim=(2, 3))), feats.pow(2).mean(dim=1)  # logits, attention map


teacher = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1),
                        nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
teacher.eval()
teacher.requires_grad_(False)
student = Student()
optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)

for step in range(5):
    x = torch.randn(16, 3, 16, 16)
    y = torch.randint(0, 10, (16,))
    with torch.no_grad():
        teacher_logits = teacher(x)
    target_cam = F.normalize(teacher_cam(teacher, teacher[5], x, teacher_logits.argmax(1)).flatten(1), dim=1)
    logits, attention = student(x)
    loss_cam = (F.normalize(attention.flatten(1), dim=1) - target_cam).pow(2).sum(1).mean()
    loss_kd = F.kl_div(F.log_softmax(logits / 4, dim=1), F.softmax(teacher_logits / 4, dim=1), reduction="batchmean")
    loss = F.cross_entropy(logits, y) + loss_kd + loss_cam
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.3f} (CAM term {loss_cam.item():.3f})")
