"""Image retrieval training: model.train() then model.apply(set_batchnorm_eval) every epoch keeps BN statistics fixed.

source: https://github.com/filipradenovic/cnnimageretrieval-pytorch/issues/19
kind: lookalike
verified: BatchNorm running_mean is unchanged after training, conv and BN weights still train
"""
import torch
import torch.nn as nn


def set_batchnorm_eval(m):
    classname = m.__class__.__name__
    if classname.find('BatchNorm') != -1:
        m.eval()


def train(train_loader, model, criterion, optimizer, epoch):
    model.train()
    model.apply(set_batchnorm_eval)
    for i, (input, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(input)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(4, 8))
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(2, 3, 8, 8), torch.randn(2, 8)) for _ in range(3)]
mean_before = model[1].running_mean.clone()
w_before = model[0].weight.detach().clone()
for epoch in range(2):
    train(loader, model, criterion, optimizer, epoch)
print(torch.equal(mean_before, model[1].running_mean), not torch.equal(w_before, model[0].weight))
