"""A convolution whose 2x2 kernel should be tied to two parameters a and b ([[a+b, a-b], [a-b, a+b]]): torch.tensor([...]) copies the values of a and b into a new tensor with no graph, and that copy becomes conv.weight, so SGD trains four free kernel entries and a, b never get a gradient.

source: https://discuss.pytorch.org/t/how-to-create-a-trainable-customized-convolutional-layer/108964
kind: bug
symptom: silent
verified: after 10 SGD steps (lr 0.1) the kernel is [1.785, 0.0, 0.0, 0.0] (the tie a+b on the diagonal is lost) and the loss is 0.072; building the kernel from the parameters with torch.cat in forward gives a = b = 0.994, kernel [1.988, 0.0, 0.0, 1.988] and loss 0.0004
"""
import torch
import torch.nn as nn
import torch.optim as optim


class MyModel(nn.Module):
    def __init__(self):
        super(MyModel, self).__init__()
        a, b = self.generate_parameters()
        self.conv = nn.Conv2d(1, 1, 2, bias=False)
        kernel = self.generate_kernel(a, b)
        self.conv.weight = nn.Parameter(kernel)

    def forward(self, x):
        x = self.conv(x)
        return x

    def generate_parameters(self):
        a = nn.Parameter(torch.zeros(1, 1))
        b = nn.Parameter(torch.zeros(1, 1))
        return a, b

    def generate_kernel(self, a, b):
        return torch.tensor([[[[a + b, a - b], [a - b, a + b]]]])  # ROOT


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
print(epoch, loss.item(), model.conv.weight.detach().flatten().tolist())
