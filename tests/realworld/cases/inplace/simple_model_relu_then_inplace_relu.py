"""SimpleModel applies F.relu and then F.relu_ on its result, overwriting the output the first ReLU saved for backward.

source: https://github.com/pytorch/pytorch/issues/148835
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch


class SimpleModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(10, 10)

    def forward(self, x):
        x = self.linear(x)
        x = torch.nn.functional.relu(x)
        x = torch.nn.functional.relu_(x)  # ROOT
        return x


torch.manual_seed(0)
model = SimpleModel()
inputs = torch.randn(1, 10)
compiled_model = model
compiled_out = compiled_model(*inputs)
compiled_out.sum().backward()  # SYMPTOM
