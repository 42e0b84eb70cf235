"""After the warm-up epochs, the joint LR scheduler is stepped at the top of the epoch, before training.

source: https://github.com/jdonnelly36/Deformable-ProtoPNet/issues/6
kind: bug
symptom: silent
verified: UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`; the first joint epoch skips lr 1e-3
"""
import torch
import torch.nn as nn


def train(model, dataloader, optimizer, log=print):
    model.train()
    for image, label in dataloader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(image), label)
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
ppnet = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
warm_optimizer = torch.optim.Adam(ppnet[2].parameters(), lr=1e-3)
joint_optimizer = torch.optim.Adam(ppnet.parameters(), lr=1e-3)
joint_lr_scheduler = torch.optim.lr_scheduler.StepLR(joint_optimizer, step_size=1, gamma=0.1)
num_warm_epochs, num_train_epochs = 2, 4
train_loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,)))] * 2
joint_lrs = []
for epoch in range(num_train_epochs):
    if epoch < num_warm_epochs:
        train(ppnet, train_loader, warm_optimizer)
    else:
        joint_lr_scheduler.step()  # ROOT
        joint_lrs.append(joint_optimizer.param_groups[0]['lr'])
        train(ppnet, train_loader, joint_optimizer)
print(joint_lrs)
