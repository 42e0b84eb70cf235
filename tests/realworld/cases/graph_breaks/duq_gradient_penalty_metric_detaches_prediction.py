"""DUQ evaluation: the Loss metric detaches y_pred before calling a loss that is a gradient penalty, so autograd.grad fails.

source: https://github.com/pytorch/ignite/issues/1674
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


def calc_gradients_input(x, y_pred):
    gradients = torch.autograd.grad(outputs=y_pred, inputs=x, grad_outputs=torch.ones_like(y_pred),
                                    create_graph=True)[0]
    return gradients.flatten(start_dim=1)


def calc_gradient_penalty(x, y_pred):
    gradients = calc_gradients_input(x, y_pred)
    grad_norm = gradients.norm(2, dim=1)
    return ((grad_norm - 1) ** 2).mean()


class Loss:
    def __init__(self, loss_fn, output_transform=lambda x: x):
        self._loss_fn, self._output_transform = loss_fn, output_transform
        self._sum, self._num_examples = 0.0, 0

    def update(self, output):
        y_pred, y, kwargs = self._output_transform(output)
        y_pred, y = y_pred.detach(), y.detach()  # ROOT
        average_loss = self._loss_fn(y_pred, y, **kwargs)
        self._sum += average_loss.item() * y.shape[0]
        self._num_examples += y.shape[0]


def eval_step(model, batch):
    model.eval()
    x, y = batch
    x.requires_grad_(True)
    y_pred = model(x)
    return {"x": x, "y": y, "y_pred": y_pred}


def output_transform_gp(output):
    return output["y_pred"], output["y"], {"x": output["x"]}


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
metric = Loss(lambda y_pred, y, x: calc_gradient_penalty(x, y_pred), output_transform=output_transform_gp)
for batch in [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(2)]:
    metric.update(eval_step(model, batch))
print("gp", metric._sum / metric._num_examples)
