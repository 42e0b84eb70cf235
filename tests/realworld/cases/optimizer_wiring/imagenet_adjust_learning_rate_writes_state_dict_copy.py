"""ImageNet example decays the learning rate through optimizer.state_dict()['param_groups'], a copy.

source: https://github.com/pytorch/examples/issues/64
kind: bug
symptom: silent
verified: after 3 "decays" optimizer.param_groups[0]['lr'] is still 0.1
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class args:
    lr = 0.1
    epochs = 3


def adjust_learning_rate(optimizer, epoch):
    """Sets the learning rate to the initial LR decayed by 10 every epoch"""
    lr = args.lr * (0.1 ** epoch)
    for param_group in optimizer.state_dict()['param_groups']:  # ROOT
        param_group['lr'] = lr


model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
for epoch in range(args.epochs):
    adjust_learning_rate(optimizer, epoch)
    for i in range(4):
        input, target = torch.randn(8, 10), torch.randint(0, 2, (8,))
        loss = criterion(model(input), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print(optimizer.param_groups[0]['lr'])
