"""ESPnet's freeze_modules set requires_grad = False on the tensors of model.state_dict(); state_dict() returns detached copies that share storage with the parameters but are other tensor objects, so the flag never reaches the parameters: the "frozen" encoder still gets gradients and the optimizer (built from model.parameters()) keeps updating it.

source: https://github.com/espnet/espnet/pull/1934
kind: bug
symptom: silent
verified: after freeze_modules(model, ["encoder."]) every encoder parameter still has requires_grad=True; after 20 Adam steps the first encoder weight has moved by 0.0133 (max abs) against 0.0 with named_parameters() and the requires_grad filter of the pull request (the decoder trains in both: 0.0139 and 0.0146)
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
    for mod, param in model.state_dict().items():
        if any(mod.startswith(m) for m in modules):
            logging.info(f"freezing {mod}, it will not be updated.")
            param.requires_grad = False  # ROOT
    return model, model.parameters()


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
