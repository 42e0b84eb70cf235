"""MonoLayout's Trainer.run_epoch, once the discriminator is trained, calls self.model_optimizer.step() between loss_G.backward(retain_graph=True) and loss_D.backward(): the Adam step updates the encoder and decoder weights in place, and loss_D still has to backpropagate through the decoder's output (fake_pred is not computed from a detached layout), so loss_D.backward() fails on the first batch of the adversarial phase.

source: https://github.com/manila95/monolayout/pull/10
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import types

import torch
import torch.nn as nn
import torch.optim as optim


def conv(i, o, stride=1):
    return nn.Sequential(nn.Conv2d(i, o, 3, stride, 1), nn.ReLU())


class Trainer:  # reduced: encoder/decoder/discriminator are small conv nets, the loader is random tensors
    def __init__(self):
        self.opt = types.SimpleNamespace(lr=1e-4, lambda_D=0.01, discr_train_epoch=0, num_epochs=2, type="static")
        self.models = {"encoder": nn.Sequential(conv(3, 8, 2), conv(8, 16, 2)),
                       "decoder": nn.Sequential(nn.Upsample(scale_factor=4), nn.Conv2d(16, 2, 3, 1, 1)),
                       "discriminator": nn.Sequential(conv(2, 8, 2), nn.Conv2d(8, 1, 3, 2, 1))}
        self.criterion_d = nn.BCEWithLogitsLoss()
        self.parameters_to_train, self.parameters_to_train_D = [], []
        for key in self.models.keys():
            if "discr" in key:
                self.parameters_to_train_D += list(self.models[key].parameters())
            else:
                self.parameters_to_train += list(self.models[key].parameters())
        self.model_optimizer = optim.Adam(self.parameters_to_train, self.opt.lr)
        self.model_optimizer_D = optim.Adam(self.parameters_to_train_D, self.opt.lr)
        self.valid, self.fake = torch.ones(4, 1, 8, 8), torch.zeros(4, 1, 8, 8)
        self.train_loader = [{"color": torch.randn(4, 3, 32, 32), "static": torch.randint(0, 2, (4, 32, 32)),
                              "discr": torch.rand(4, 2, 32, 32)} for _ in range(2)]

    def process_batch(self, inputs):
        features = self.models["encoder"](inputs["color"])
        outputs = {"topview": self.models["decoder"](features)}
        losses = {"loss": nn.functional.cross_entropy(outputs["topview"], inputs[self.opt.type])}
        return outputs, losses

    def run_epoch(self):
        loss = {"loss": 0.0, "loss_discr": 0.0}
        for batch_idx, inputs in enumerate(self.train_loader):
            outputs, losses = self.process_batch(inputs)
            self.model_optimizer.zero_grad()
            fake_pred = self.models["discriminator"](outputs["topview"])
            real_pred = self.models["discriminator"](inputs["discr"].float())
            loss_GAN = self.criterion_d(fake_pred, self.valid)
            loss_D = self.criterion_d(fake_pred, self.fake) + self.criterion_d(real_pred, self.valid)
            loss_G = self.opt.lambda_D * loss_GAN + losses["loss"]

            # Train Discriminator
            if self.epoch > self.opt.discr_train_epoch:
                loss_G.backward(retain_graph=True)
                self.model_optimizer.step()  # ROOT
                self.model_optimizer_D.zero_grad()
                loss_D.backward()  # SYMPTOM
                self.model_optimizer_D.step()
            else:
                losses["loss"].backward()
                self.model_optimizer.step()
            loss["loss"] += losses["loss"].item()
            loss["loss_discr"] += loss_D.item()
        return loss

    def train(self):
        for self.epoch in range(self.opt.num_epochs):
            loss = self.run_epoch()
            print("Epoch: %d | Loss: %.4f | Discriminator Loss: %.4f" % (self.epoch, loss["loss"], loss["loss_discr"]))


torch.manual_seed(0)
Trainer().train()
