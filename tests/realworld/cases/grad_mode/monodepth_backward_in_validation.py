"""Depth trainer changed to backpropagate the validation loss, inside the no_grad validation block.

source: https://github.com/nianticlabs/monodepth2/issues/24
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.models = {"encoder": nn.Conv2d(3, 4, 3, padding=1), "depth": nn.Conv2d(4, 1, 1)}
        params = [p for m in self.models.values() for p in m.parameters()]
        self.model_optimizer = torch.optim.Adam(params, lr=1e-4)

    def process_batch(self, inputs):
        disp = torch.sigmoid(self.models["depth"](self.models["encoder"](inputs["color"])))
        losses = {"loss": (disp - inputs["target"]).abs().mean()}
        return disp, losses

    def val(self, inputs):
        for m in self.models.values():
            m.eval()
        with torch.no_grad():
            outputs, losses = self.process_batch(inputs)
            self.model_optimizer.zero_grad()
            losses["loss"].backward()  # ROOT
            self.model_optimizer.step()
        for m in self.models.values():
            m.train()


trainer = Trainer()
trainer.val({"color": torch.randn(2, 3, 8, 8), "target": torch.rand(2, 1, 8, 8)})
