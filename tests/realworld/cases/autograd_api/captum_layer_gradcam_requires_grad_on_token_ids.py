"""Captum's LayerGradCam calls `apply_gradient_requirements(inputs)` on the model inputs and then takes `torch.autograd.grad` of the target output with respect to the layer output saved by a forward hook; with token-id inputs (int64, which cannot require grad) and a frozen model, nothing between the inputs and the layer requires grad, so the layer output is not in any graph and the gradient call fails.

source: https://github.com/pytorch/captum/pull/647
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import threading
import warnings
from collections import defaultdict

import torch
import torch.nn as nn


def apply_gradient_requirements(inputs):
    """Sets requires_grad on each input; returns whether each one required grad before."""
    grad_required = []
    for index, input in enumerate(inputs):
        grad_required.append(input.requires_grad)
        if not input.dtype.is_floating_point:
            warnings.warn(f"Input Tensor {index} has a dtype of {input.dtype}. "
                          "Gradients cannot be activated for these data types.")
        elif not input.requires_grad:
            input.requires_grad_()
    return grad_required


def undo_gradient_requirements(inputs, grad_required):
    for index, input in enumerate(inputs):
        if not grad_required[index]:
            input.requires_grad_(False)


def _forward_layer_eval_with_return(forward_fn, inputs, layer, target_ind):
    saved_layer = defaultdict(dict)
    lock = threading.Lock()

    def forward_hook(module, inp, out):
        eval_tsrs = (out,)
        with lock:
            saved_layer[layer][out.device] = eval_tsrs
            return eval_tsrs[0].clone()

    hook = layer.register_forward_hook(forward_hook)
    try:
        output = forward_fn(*inputs)
    finally:
        hook.remove()
    return saved_layer, output[torch.arange(len(output)), target_ind]


def compute_layer_gradients_and_eval(forward_fn, layer, inputs, target_ind):
    with torch.autograd.set_grad_enabled(True):
        saved_layer, output = _forward_layer_eval_with_return(forward_fn, inputs, layer, target_ind)
        grad_inputs = tuple(t for tensors in saved_layer[layer].values() for t in tensors)
        saved_grads = torch.autograd.grad(torch.unbind(output), grad_inputs)  # SYMPTOM
    return saved_grads, grad_inputs


class LayerGradCam:
    def __init__(self, forward_func, layer):
        self.forward_func = forward_func
        self.layer = layer

    def attribute(self, inputs, target):
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        gradient_mask = apply_gradient_requirements(inputs)  # ROOT
        layer_gradients, layer_evals = compute_layer_gradients_and_eval(self.forward_func, self.layer, inputs, target)
        undo_gradient_requirements(inputs, gradient_mask)
        summed_grads = tuple(torch.mean(g, dim=tuple(range(2, g.dim())), keepdim=True) for g in layer_gradients)
        return tuple(torch.relu(torch.sum(g * e, dim=1, keepdim=True)) for g, e in zip(summed_grads, layer_evals))[0]


class TextCNN(nn.Module):
    def __init__(self, vocab=50, dim=16, classes=3):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.conv = nn.Conv1d(dim, 8, 3, padding=1)
        self.fc = nn.Linear(8, classes)

    def forward(self, token_ids):
        x = self.embedding(token_ids).transpose(1, 2)
        x = torch.relu(self.conv(x))
        return self.fc(x.max(dim=2).values)


torch.manual_seed(0)
model = TextCNN().eval()
model.requires_grad_(False)  # attribution only: the weights are not trained
token_ids = torch.randint(0, 50, (4, 12))
warnings.simplefilter("ignore")
attr = LayerGradCam(model, model.conv).attribute(token_ids, target=torch.tensor([0, 1, 2, 0]))
print("GradCAM attribution shape:", tuple(attr.shape), "sum", round(attr.sum().item(), 4))
