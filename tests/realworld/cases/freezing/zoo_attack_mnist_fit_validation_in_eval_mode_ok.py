"""The same fit() with model.train() for the 'train' phase and model.eval() for the 'val' phase (the fix proposed in the issue): Dropout2d is off while the validation loss and accuracy are measured.

source: https://github.com/as791/ZOO_Attack_PyTorch/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class MNIST(nn.Module):
    def __init__(self):
        super(MNIST, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 32, 3, 1)
        self.conv3 = nn.Conv2d(32, 64, 3, 1)
        self.conv4 = nn.Conv2d(64, 64, 3, 1)
        self.dropout1 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(1024, 200)
        self.fc2 = nn.Linear(200, 200)
        self.fc3 = nn.Linear(200, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv3(x))
        x = F.relu(self.conv4(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout1(x)
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def fit(model, device, train_loader, val_loader, optimizer, criterion, epochs):
    data_loader = {'train': train_loader, 'val': val_loader}
    for epoch in range(epochs):
        loss_per_epoch, val_loss_per_epoch = 0, 0
        acc_per_epoch, val_acc_per_epoch, total, val_total = 0, 0, 0, 0
        for phase in ('train', 'val'):
            if phase == 'train':
                model.train()
            else:
                model.eval()
            for i, data in enumerate(data_loader[phase]):
                inputs, labels = data[0].to(device), data[1].to(device)
                outputs = model(inputs)
                preds = torch.max(outputs, 1)[1]
                loss = criterion(outputs, labels)
                if phase == 'train':
                    acc_per_epoch += (labels == preds).sum().item()
                    total += labels.size(0)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    loss_per_epoch += loss.item()
                else:
                    val_acc_per_epoch += (labels == preds).sum().item()
                    val_total += labels.size(0)
                    val_loss_per_epoch += loss.item()
        print("Epoch: {} Loss: {:0.4f} Acc: {:0.4f} Val_Loss: {:0.4f} Val_Acc: {:0.4f}".format(
            epoch + 1, loss_per_epoch / len(train_loader), acc_per_epoch / total,
            val_loss_per_epoch / len(val_loader), val_acc_per_epoch / val_total))


torch.manual_seed(42)
templates = torch.randn(10, 1, 28, 28)


def batch(n):
    y = torch.randint(0, 10, (n,))
    return 3 * templates[y] + torch.randn(n, 1, 28, 28), y


train_loader = [batch(32) for _ in range(5)]
val_loader = [batch(64) for _ in range(2)]
device = torch.device("cpu")
model = MNIST().to(device)
optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-6)
criterion = nn.CrossEntropyLoss()
fit(model, device, train_loader, val_loader, optimizer, criterion, 3)
