"""ESPnet TTS train(): the model is wrapped in torch.nn.DataParallel before the `--freeze-mods` prefixes are matched against named_parameters(), so every name now starts with "module." and no parameter matches; the modules meant to be frozen keep training.

source: https://github.com/espnet/espnet/pull/1983
kind: bug
symptom: silent
verified: with freeze_mods=["encoder."] every encoder parameter keeps requires_grad=True and its weights change after the optimizer steps
"""
import argparse

import torch
import torch.nn as nn


class Tacotron2(nn.Module):
    def __init__(self, idim=20, odim=8, adim=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Embedding(idim, adim), nn.Linear(adim, adim), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(adim, adim), nn.ReLU(), nn.Linear(adim, odim))

    def forward(self, xs, ys):
        return nn.functional.l1_loss(self.decoder(self.encoder(xs)), ys)


def train(args):
    model = Tacotron2()
    if args.ngpu >= 1 or args.data_parallel:
        model = torch.nn.DataParallel(model)

    # freeze modules, if specified
    if args.freeze_mods:
        for mod, param in model.named_parameters():
            if any(mod.startswith(key) for key in args.freeze_mods):  # ROOT
                print(f"{mod} is frozen not to be updated.")
                param.requires_grad = False

    model_params = filter(lambda x: x.requires_grad, model.parameters())
    optimizer = torch.optim.Adam(model_params, lr=1e-3)
    enc_before = [p.detach().clone() for p in model.module.encoder.parameters()]
    for iteration in range(3):
        xs, ys = torch.randint(0, 20, (4, 6)), torch.randn(4, 6, 8)
        loss = model(xs, ys)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print([p.requires_grad for p in model.module.encoder.parameters()],
          any(not torch.equal(a, b) for a, b in zip(enc_before, model.module.encoder.parameters())))


parser = argparse.ArgumentParser()
parser.add_argument("--ngpu", type=int, default=0)
parser.add_argument("--data-parallel", action="store_true", default=True)
parser.add_argument("--freeze-mods", nargs="+", default=["encoder."])
torch.manual_seed(0)
train(parser.parse_args([]))
