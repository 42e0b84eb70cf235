"""zennit's mod_params after PR 61: the modified weights are set on the module as a new Parameter with setattr and the stored Parameter is set back in the finally block, so the tensor the convolution saved for its backward keeps the modified weights and the LRP relevance is conserved.

source: https://github.com/chr5tphr/zennit/issues/60
kind: lookalike
"""
from contextlib import contextmanager

import torch


def stabilize(input, epsilon=1e-6):
    return input + ((input == 0.).to(input) + input.sign()) * epsilon


@contextmanager
def mod_params(module, modifier, param_keys=None, require_params=True):
    try:
        stored_params = {}
        if param_keys is None:
            param_keys = [name for name, _ in module.named_parameters(recurse=False)]

        missing = [key for key in param_keys if not hasattr(module, key)]
        if require_params and missing:
            raise RuntimeError('Module {} requires missing parameters: \'{}\''.format(module, '\', \''.join(missing)))

        for key in param_keys:
            if key not in missing:
                param = getattr(module, key)
                if param is not None:
                    stored_params[key] = param
                    setattr(module, key, torch.nn.Parameter(modifier(param.data, key)))
        yield module
    finally:
        for key, value in stored_params.items():
            setattr(module, key, value)


class BasicHook:  # zennit.core.BasicHook's forward and backward hooks; the hook registration is left out
    def __init__(self, input_modifiers, param_modifiers, output_modifiers, gradient_mapper, reducer):
        self.input_modifiers = input_modifiers
        self.param_modifiers = param_modifiers
        self.output_modifiers = output_modifiers
        self.gradient_mapper = gradient_mapper
        self.reducer = reducer
        self.param_keys = None
        self.require_params = True
        self.stored_tensors = {}

    def forward(self, module, input, output):
        self.stored_tensors['input'] = input

    def backward(self, module, grad_input, grad_output):
        original_input = self.stored_tensors['input'][0].detach()
        param_kwargs = dict(param_keys=self.param_keys, require_params=self.require_params)
        inputs = []
        outputs = []
        for in_mod, param_mod, out_mod in zip(self.input_modifiers, self.param_modifiers, self.output_modifiers):
            input = in_mod(original_input).requires_grad_()
            with mod_params(module, param_mod, **param_kwargs) as modified, torch.autograd.enable_grad():
                output = modified.forward(input)
                output = out_mod(output)
            inputs.append(input)
            outputs.append(output)
        gradients = torch.autograd.grad(outputs, inputs, grad_outputs=self.gradient_mapper(grad_output[0], outputs))
        relevance = self.reducer(inputs, gradients)
        return tuple(relevance if original.shape == relevance.shape else None for original in grad_input)


class Gamma(BasicHook):
    def __init__(self, gamma=0.25):
        super().__init__(
            input_modifiers=[lambda input: input],
            param_modifiers=[lambda param, _: param + gamma * param.clamp(min=0)],
            output_modifiers=[lambda output: output],
            gradient_mapper=(lambda out_grad, outputs: out_grad / stabilize(outputs[0])),
            reducer=(lambda inputs, gradients: inputs[0] * gradients[0])
        )


torch.manual_seed(0)
layer = torch.nn.Conv2d(3, 4, 3, bias=False)
x = torch.rand(2, 3, 6, 6)
rule = Gamma(gamma=0.25)
out = layer(x)
rule.forward(layer, (x,), out)
relevance_out = torch.rand(2, 4, 4, 4)
relevance_in, = rule.backward(layer, (x,), (relevance_out,))
print("output relevance sum", round(relevance_out.sum().item(), 4))
print("input relevance sum", round(relevance_in.sum().item(), 4))
