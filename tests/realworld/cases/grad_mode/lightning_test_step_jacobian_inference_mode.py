"""Jacobian taken in test_step: the test loop runs under inference_mode, so enable_grad cannot help.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/19910
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class LitModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(5, 5)

    def test_step(self, batch):
        with torch.enable_grad():
            x = batch.clone().requires_grad_(True)
            y = self.layer(x) ** 2
            eye = torch.eye(5)
            rows = [torch.autograd.grad(y, x, v.expand_as(y), retain_graph=True)[0] for v in eye.unbind()]  # SYMPTOM
            return torch.stack(rows)


def run_test_loop(model, batches):
    outputs = []
    with torch.inference_mode():  # ROOT
        for batch in batches:
            outputs.append(model.test_step(batch))
    return outputs


torch.manual_seed(0)
model = LitModel()
print(len(run_test_loop(model, [torch.randn(4, 5) for _ in range(2)])))
