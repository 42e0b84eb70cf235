"""Fine-tuning where only a new first layer is trained: the pretrained layers have requires_grad = False and the optimizer gets only the first layer; the loss still backpropagates through the frozen layers to reach it.

source: https://discuss.pytorch.org/t/freezing-the-updates-without-freezing-the-gradients/7358
kind: lookalike
verified: the first layer's weight gets a gradient and changes; the frozen layers keep .grad None and their values
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
pretrained = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
for param in pretrained.parameters():
    param.requires_grad = False
first_layer = nn.Linear(10, 16)
model = nn.Sequential(first_layer, nn.ReLU(), pretrained)
optimizer = torch.optim.SGD(first_layer.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 10), torch.randint(0, 4, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(first_layer.weight.grad is not None, pretrained[0].weight.grad)
