"""FCN trained with nn.BCELoss on the sigmoid of the score map against one-hot masks.

source: https://github.com/yunlongdong/FCN-pytorch/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)


class FCNs(nn.Module):
    def __init__(self, n_class):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.deconv = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)
        self.classifier = nn.Conv2d(8, n_class, kernel_size=1)

    def forward(self, x):
        return self.classifier(torch.relu(self.deconv(self.features(x))))


fcn_model = FCNs(n_class=2)
criterion = nn.BCELoss()
optimizer = optim.SGD(fcn_model.parameters(), lr=1e-2, momentum=0.7)
for index in range(3):
    input = torch.randn(2, 3, 16, 16)
    y = torch.randint(0, 2, (2, 16, 16))
    target = nn.functional.one_hot(y, 2).permute(0, 3, 1, 2).float()
    optimizer.zero_grad()
    output = torch.sigmoid(fcn_model(input))
    loss = criterion(output, target)
    loss.backward()
    optimizer.step()
