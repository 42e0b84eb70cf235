"""SINGD installs full backward hooks on the model's Conv2d layers; the next layer, ReLU(inplace=True), then modifies the hooked layer's output in place, which a full backward hook forbids.

source: https://github.com/f-dangel/singd/issues/56
kind: bug
symptom: crash
verified: RuntimeError: Output 0 of BackwardHookFunction is a view and is being modified inplace
"""
import torch
from torch import rand
from torch.nn import Conv2d, Linear, ReLU, Sequential

TRIGGER_BUG = True


class SINGD(torch.optim.SGD):
    def __init__(self, model, lr=0.001):
        super().__init__(model.parameters(), lr=lr)
        self.grad_outputs = {}
        for name, module in model.named_modules():
            if isinstance(module, (Conv2d, Linear)):
                module.register_full_backward_hook(self._save_grad_output(name))

    def _save_grad_output(self, name):
        def hook(module, grad_input, grad_output):
            self.grad_outputs[name] = grad_output[0].detach()
        return hook


model = Sequential(
    Conv2d(1, 1, 3),
    ReLU(inplace=TRIGGER_BUG),  # ROOT
)
optim = SINGD(model)  # install hooks

batch_size = 2
X = rand(batch_size, 1, 5, 5)

output = model(X)  # SYMPTOM
output.sum().backward()
optim.step()
