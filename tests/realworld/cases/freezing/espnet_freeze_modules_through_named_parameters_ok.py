"""ESPnet's freeze_modules after the pull request: it walks model.named_parameters(), so requires_grad = False lands on the encoder's parameters themselves, and it hands the optimizer only the parameters that still require grad.

source: https://github.com/espnet/espnet/pull/1934
kind: lookalike
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F


class E2E(nn.Module):
    def __init__(self, idim=20, adim=32, odim=10):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(idim, adim), nn.ReLU(), nn.Linear(adim, adim))
        self.decoder = nn.Sequential(nn.Linear(adim, adim), nn.ReLU(), nn.Linear(adim, odim))

    def forward(self, xs_pad, ys_pad):
        hs = self.encoder(xs_pad)
        logits = self.decoder(hs)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), ys_pad.view(-1))


def freeze_modules(model, modules):
    for mod, param in model.named_parameters():
        if any(mod.startswith(m) for m in modules):
            logging.info(f"freezing {mod}, it will not be updated.")
            param.requires_grad = False
    model_params = filter(lambda x: x.requires_grad, model.parameters())
    return model, model_params


torch.manual_seed(0)
model = E2E()
model, model_params = freeze_modules(model, ["encoder."])
print("encoder requires_grad", [p.requires_grad for p in model.encoder.parameters()])
optimizer = torch.optim.Adam(model_params, lr=1e-3)
enc0 = model.encoder[0].weight.detach().clone()
dec0 = model.decoder[0].weight.detach().clone()
for iteration in range(20):
    xs_pad, ys_pad = torch.randn(8, 12, 20), torch.randint(0, 10, (8, 12))
    loss = model(xs_pad, ys_pad)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("encoder moved", (model.encoder[0].weight.detach() - enc0).abs().max().item(),
      "decoder moved", (model.decoder[0].weight.detach() - dec0).abs().max().item())
