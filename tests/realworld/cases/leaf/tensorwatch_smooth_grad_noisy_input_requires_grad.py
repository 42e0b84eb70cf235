"""tensorwatch saliency: gradcam leaves the input requiring grad, then SmoothGrad sets requires_grad on input + noise.

source: https://github.com/microsoft/tensorwatch/issues/25
kind: bug
symptom: crash
verified: RuntimeError: you can only change requires_grad flags of leaf variables.
"""
import torch
import torch.nn as nn


class VanillaGradExplainer(object):
    def __init__(self, model):
        self.model = model

    def _backprop(self, inp, ind):
        inp.requires_grad = True  # ROOT
        output = self.model(inp)
        if ind is None:
            ind = output.max(1)[1]
        grad_out = torch.zeros_like(output)
        grad_out.scatter_(1, ind.unsqueeze(0).t(), 1.0)
        output.backward(grad_out)
        return inp.grad

    def explain(self, inp, ind=None, raw_inp=None):
        return self._backprop(inp, ind)


class SmoothGradExplainer(object):
    def __init__(self, base_explainer, stdev_spread=0.15, nsamples=4):
        self.base_explainer, self.stdev_spread, self.nsamples = base_explainer, stdev_spread, nsamples

    def explain(self, inp, ind=None, raw_inp=None):
        stdev = self.stdev_spread * (inp.max() - inp.min())
        total_gradients = torch.zeros_like(inp)
        for i in range(self.nsamples):
            noise = torch.randn(inp.size()) * stdev
            noisy_inp = inp + noise
            grad = self.base_explainer.explain(noisy_inp, ind)
            total_gradients += grad
        return total_gradients / self.nsamples


def get_image_saliency_results(model, input_tensor, methods):
    results = {}
    for method in methods:
        exp = VanillaGradExplainer(model) if method == 'gradcam' else SmoothGradExplainer(VanillaGradExplainer(model))
        results[method] = exp.explain(input_tensor, None)
    return results


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
input_tensor = torch.randn(1, 3, 8, 8)
results = get_image_saliency_results(model, input_tensor, methods=['gradcam', 'smooth_grad'])
