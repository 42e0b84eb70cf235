"""The tied 2x2 kernel built in forward from the registered parameters a and b with torch.cat and applied with F.conv2d: the gradient reaches a and b and the kernel keeps its [[a+b, a-b], [a-b, a+b]] form.

source: https://discuss.pytorch.org/t/how-to-create-a-trainable-customized-convolutional-layer/108964
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class MyModel(nn.Module):
    def __init__(self):
        super(MyModel, self).__init__()
        self.a, self.b = self.generate_parameters()

    def forward(self, x):
        kernel = self.generate_kernel(self.a, self.b)
        x = F.conv2d(x, kernel)
        return x

    def generate_parameters(self):
        a = nn.Parameter(torch.zeros(1, 1))
        b = nn.Parameter(torch.zeros(1, 1))
        return a, b

    def generate_kernel(self, a, b):
        row0 = torch.cat([a + b, a - b], dim=1)
        row1 = torch.cat([a - b, a + b], dim=1)
        return torch.cat([row0, row1], dim=0).view(1, 1, 2, 2)


model = MyModel()
criterion = nn.MSELoss()
optimizer = optim.SGD(model.parameters(), lr=0.1)
inputs, labels = torch.tensor([[[[1.0, 0], [0, 0]]]]), torch.tensor([[[[2.0]]]])
for epoch in range(10):
    optimizer.zero_grad()
    outputs = model(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
print(epoch, loss.item(), model.generate_kernel(model.a, model.b).detach().flatten().tolist())
