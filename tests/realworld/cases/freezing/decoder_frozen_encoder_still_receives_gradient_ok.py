"""Fine-tuning only the encoder of an encoder-decoder model: the decoder's parameters are frozen with requires_grad=False, and autograd still backpropagates through the decoder's activations to the encoder (the answer: freezing does not block the gradient flow).

source: https://discuss.pytorch.org/t/set-requires-grad-false-for-earlier-layers-in-a-model/187063
kind: lookalike
verified: the encoder weights get nonzero gradients and change, the decoder weights keep .grad None and their values
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 6))
        self.decoder = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 12))

    def forward(self, x):
        return self.decoder(self.encoder(x))


torch.manual_seed(0)
model = Model()
for p in model.decoder.parameters():
    p.requires_grad = False
optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for step in range(3):
    x = torch.randn(8, 12)
    loss = nn.functional.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.encoder[0].weight.grad.abs().sum().item() > 0, model.decoder[0].weight.grad)
