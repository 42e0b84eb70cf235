"""ivadomed cmd_train: the cosine-annealing scheduler, sized in epochs, is stepped inside the batch loop.

source: https://github.com/ivadomed/ivadomed/pull/55
kind: bug
symptom: silent
verified: with 4 epochs of 5 batches and T_max=num_epochs=4 the epochs start with lr 1e-3, 1.5e-4, 5e-4 and 8.5e-4 (one cosine half-period every 4 batches, going down and back up), where stepping once per epoch gives 1e-3, 8.5e-4, 5e-4, 1.5e-4
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Unet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(1, 8, 3, padding=1)
        self.up = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, x):
        return torch.sigmoid(self.up(F.relu(self.down(x))))


def dice_loss(input, target):
    smooth = 1.0
    intersection = (input * target).sum()
    return - (2.0 * intersection + smooth) / (input.sum() + target.sum() + smooth)


def cmd_train(num_epochs=4, initial_lr=1e-3):
    torch.manual_seed(0)
    model = Unet()
    train_loader = [(torch.rand(2, 1, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()) for _ in range(5)]
    optimizer = torch.optim.Adam(model.parameters(), lr=initial_lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, num_epochs)
    lrs = []
    for epoch in range(1, num_epochs + 1):
        lrs.append(scheduler.get_last_lr()[0])
        model.train()
        for i, batch in enumerate(train_loader):
            input_samples, gt_samples = batch
            preds = model(input_samples)
            loss = dice_loss(preds, gt_samples)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()  # ROOT
    return lrs


print(cmd_train())
