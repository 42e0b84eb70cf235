"""ImageNet example resumed with a new --lr: optimizer.load_state_dict restores the checkpoint's learning rate.

source: https://github.com/pytorch/examples/issues/816
kind: bug
symptom: silent
verified: resumed with --lr 0.001, the optimizer still trains at the checkpoint's lr 0.1
"""
import io
import torch
import torch.nn as nn

torch.manual_seed(0)


class args:
    lr = 0.1
    momentum = 0.9
    weight_decay = 1e-4
    resume = None
    start_epoch = 0


def train(model, optimizer, criterion):
    for i in range(3):
        images, target = torch.randn(8, 10), torch.randint(0, 3, (8,))
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


criterion = nn.CrossEntropyLoss()
model = nn.Linear(10, 3)
optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
train(model, optimizer, criterion)
buffer = io.BytesIO()
torch.save({'epoch': 1, 'state_dict': model.state_dict(), 'optimizer': optimizer.state_dict()}, buffer)

# second run: python main.py --resume checkpoint.pth.tar --lr 0.001
args.lr = 0.001
args.resume = buffer
model = nn.Linear(10, 3)
optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
if args.resume:
    args.resume.seek(0)
    checkpoint = torch.load(args.resume)
    args.start_epoch = checkpoint['epoch']
    model.load_state_dict(checkpoint['state_dict'])
    optimizer.load_state_dict(checkpoint['optimizer'])  # ROOT
train(model, optimizer, criterion)
print(optimizer.param_groups[0]['lr'])
