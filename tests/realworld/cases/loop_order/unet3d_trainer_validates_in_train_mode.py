"""3D U-Net trainer runs the validation batches through the model without self.model.eval(), moving BatchNorm statistics on validation data.

source: https://github.com/wolny/pytorch-3dunet/issues/53
kind: bug
symptom: silent
verified: validate() moves BatchNorm running_mean by 0.16 on validation data and reports loss 1.17 from batch statistics; with self.model.eval() the statistics stay and the loss is 1.46
"""
import torch
import torch.nn as nn


class UNet3DTrainer:
    def __init__(self, model, optimizer, loss_criterion):
        self.model, self.optimizer, self.loss_criterion = model, optimizer, loss_criterion

    def _forward_pass(self, input, target):
        output = self.model(input)
        return output, self.loss_criterion(output, target)

    def train(self, train_loader):
        self.model.train()
        for input, target in train_loader:
            output, loss = self._forward_pass(input, target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate(self, val_loader):
        losses = []
        with torch.no_grad():
            for input, target in val_loader:
                output, loss = self._forward_pass(input, target)  # ROOT
                losses.append(loss.item())
        return sum(losses) / len(losses)


torch.manual_seed(0)
model = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.Conv3d(4, 1, 1))
trainer = UNet3DTrainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), nn.MSELoss())
train_loader = [(torch.randn(1, 1, 8, 8, 8), torch.randn(1, 1, 8, 8, 8)) for _ in range(3)]
val_loader = [(torch.randn(1, 1, 8, 8, 8) * 3 + 1, torch.randn(1, 1, 8, 8, 8)) for _ in range(3)]
trainer.train(train_loader)
mean_before = model[1].running_mean.clone()
print(trainer.validate(val_loader), trainer.validate(val_loader), (model[1].running_mean - mean_before).abs().max().item())
