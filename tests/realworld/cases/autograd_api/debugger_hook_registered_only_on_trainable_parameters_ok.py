"""Training debugger hook registers gradient hooks only on parameters that require gradients.

source: https://github.com/awslabs/sagemaker-debugger/pull/193
kind: lookalike
"""
import torch
import torch.nn as nn


class GradientHook:
    def __init__(self):
        self.grad_norms = {}

    def register_module(self, module):
        for name, param in module.named_parameters():
            if param.requires_grad:
                param.register_hook(self._make_hook(name))

    def _make_hook(self, name):
        def back_hook(grad):
            self.grad_norms[name] = grad.norm().item()
        return back_hook


class TestModel(nn.Module):
    def __init__(self, embedding_matrix):
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(embedding_matrix, freeze=True)
        self.fc = nn.Linear(embedding_matrix.size(1), 2)

    def forward(self, x):
        return self.fc(self.embedding(x).mean(1))


torch.manual_seed(0)
model = TestModel(torch.randn(100, 16))
hook = GradientHook()
hook.register_module(model)
optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
x, y = torch.randint(0, 100, (8, 5)), torch.randint(0, 2, (8,))
loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
optimizer.step()
print(hook.grad_norms)
