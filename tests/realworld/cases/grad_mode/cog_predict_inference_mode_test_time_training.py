"""Cog predictor fine-tunes a latent inside predict(), but predict is decorated with torch.inference_mode().

source: https://github.com/replicate/cog/issues/1681
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class BasePredictor:
    def setup(self):
        pass


class Predictor(BasePredictor):
    def setup(self):
        torch.manual_seed(0)
        self.generator = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8))
        self.generator.requires_grad_(False)

    @torch.inference_mode()  # ROOT
    def predict(self, target, steps=5, lr=0.1):
        latent = torch.zeros(1, 4, requires_grad=True)
        optimizer = torch.optim.Adam([latent], lr=lr)
        for step in range(steps):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.generator(latent), target)
            loss.backward()  # SYMPTOM
            optimizer.step()
        return self.generator(latent)


predictor = Predictor()
predictor.setup()
print(predictor.predict(torch.randn(1, 8)))
