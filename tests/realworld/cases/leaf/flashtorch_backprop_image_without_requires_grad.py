"""flashtorch-style Backprop saliency: the first conv's hook reads grad_in[0] of an image that does not require grad.

source: https://github.com/MisaOgura/flashtorch/issues/16
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'shape'
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Backprop:
    def __init__(self, model):
        self.model = model
        self.model.eval()
        self.gradients = None
        first_layer = [m for m in model.modules() if isinstance(m, nn.Conv2d)][0]
        first_layer.register_backward_hook(self._record_gradients)

    def _record_gradients(self, module, grad_in, grad_out):
        if self.gradients.shape == grad_in[0].shape:  # SYMPTOM
            self.gradients = grad_in[0]

    def calculate_gradients(self, input_, target_class):
        self.model.zero_grad()
        self.gradients = torch.zeros(input_.shape)
        output = self.model(input_)
        target = torch.zeros(output.size())
        target[0][target_class] = 1
        output.backward(gradient=target)
        return self.gradients.detach().clone()[0]


net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(), nn.Linear(8, 10))
image = torch.rand(1, 3, 84, 84)  # ROOT
backprop = Backprop(net)
target_class = 4
gradients = backprop.calculate_gradients(image, target_class)
print(gradients.abs().max())
