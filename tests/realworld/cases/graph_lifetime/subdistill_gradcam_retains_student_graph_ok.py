"""subdistill's Grad-CAM helper after its fix: `compute_cam` takes a `retain_graph` argument and calls `logits.sum().backward(retain_graph=retain_graph)`; the distiller passes `retain_graph=False` for the frozen teacher and `retain_graph=True` for the student, so the student's graph, which the CAM agreement loss is built from, survives the helper's backward and the training step's `loss.backward()` trains the student.

source: https://github.com/p16i/subdistill/commit/ae37656f161edbaff64936ea4d3db81ebedc1f79
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


def resolve(model, name):
    layer_name, index = name.split(".")
    return getattr(model, layer_name)[int(index)]


def compute_cam(model, x, y, retain_graph=False):
    hook = None
    last_layer = resolve(model, getattr(model, "__last_layer"))
    num_classes = last_layer.weight.shape[0]
    try:
        module = resolve(model, getattr(model, "__layer_before_avgpool"))
        _, hook = attach_hook_intercept_module(module, should_retain_grad=True, detach_output=False)
        logits = model(x) * F.one_hot(y, num_classes=num_classes)
        logits.sum().backward(retain_graph=retain_graph)
        output = get_output(module)
        grad = output.grad
        gradcam = (output * grad.mean(dim=(2, 3), keepdim=True)).sum(dim=1)
    finally:
        if hook is not None:
            hook.remove()
    return gradcam


def make_cnn(width):
    model = nn.Sequential()
    model.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                                   nn.Conv2d(width, 2 * width, 3, 2, 1), nn.BatchNorm2d(2 * width), nn.ReLU())
    model.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, 10))
    setattr(model, "__last_layer", "head.2")
    setattr(model, "__layer_before_avgpool", "features.5")
    return model


class LayerwiseKD:
    def __init__(self, teacher, student, lambda_task=1.0, lambda_kd=1.0, temperature=4.0):
        self.teacher, self.student = teacher, student
        self.lambda_task, self.lambda_kd, self.temperature = lambda_task, lambda_kd, temperature

    def compute_loss(self, x, y):
        with torch.no_grad():
            teacher_logits = self.teacher(x)
        student_logits = self.student(x)
        loss_task = F.cross_entropy(student_logits, y)
        loss_kd = F.kl_div(F.log_softmax(student_logits / self.temperature, dim=1),
                           F.softmax(teacher_logits / self.temperature, dim=1), reduction="batchmean")
        teacher_y_pred = torch.argmax(teacher_logits, dim=1).detach()
        teacher_cams = F.normalize(compute_cam(self.teacher, x, teacher_y_pred, retain_graph=False).flatten(start_dim=1), dim=1)
        student_cams = F.normalize(compute_cam(self.student, x, teacher_y_pred, retain_graph=True).flatten(start_dim=1), dim=1)
        loss_e2 = 1 - (student_cams * teacher_cams).sum(dim=1).mean()
        return self.lambda_task * loss_task + self.lambda_kd * loss_kd + loss_e2


teacher = make_cnn(16)
teacher.eval()
teacher.requires_grad_(False)
student = make_cnn(8)
distiller = LayerwiseKD(teacher, student)
optimizer = torch.optim.SGD(student.parameters(), lr=0.01, momentum=0.9)

for step in range(5):
    x = torch.randn(16, 3, 16, 16)
    y = torch.randint(0, 10, (16,))
    student.train()
    optimizer.zero_grad()
    loss = distiller.compute_loss(x, y)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.3f}")
