"""SINGD's full backward hooks on a model whose ReLU is out of place (TRIGGER_BUG = False in the issue's example), so the hooked Conv2d output is not modified in place.

source: https://github.com/f-dangel/singd/issues/56
kind: lookalike
verified: runs; the hook records the Conv2d output gradient
"""
import torch
from torch import rand
from torch.nn import Conv2d, Linear, ReLU, Sequential

TRIGGER_BUG = False


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
    ReLU(inplace=TRIGGER_BUG),
)
optim = SINGD(model)  # install hooks

batch_size = 2
X = rand(batch_size, 1, 5, 5)

output = model(X)
output.sum().backward()
optim.step()
assert '0' in optim.grad_outputs
