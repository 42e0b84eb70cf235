"""The re-id baseline puts model.model.fc in an optimizer group although forward never uses it.

source: https://github.com/layumi/Person_reID_baseline_pytorch/issues/90
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim


class ft_net(nn.Module):
    def __init__(self, class_num=4):
        super().__init__()
        self.model = nn.Module()
        self.model.conv = nn.Conv2d(3, 8, 3)
        self.model.fc = nn.Linear(8, 1000)
        self.classifier = nn.Linear(8, class_num)

    def forward(self, x):
        x = self.model.conv(x).mean((2, 3))
        return self.classifier(x)


torch.manual_seed(0)
model = ft_net()
ignored_params = list(map(id, model.model.fc.parameters())) + list(map(id, model.classifier.parameters()))
base_params = filter(lambda p: id(p) not in ignored_params, model.parameters())
optimizer_ft = optim.SGD([
    {'params': base_params, 'lr': 0.01},
    {'params': model.model.fc.parameters(), 'lr': 0.1},
    {'params': model.classifier.parameters(), 'lr': 0.1}
], weight_decay=5e-4, momentum=0.9, nesterov=True)
criterion = nn.CrossEntropyLoss()
inputs, labels = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
for _ in range(5):
    optimizer_ft.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer_ft.step()
