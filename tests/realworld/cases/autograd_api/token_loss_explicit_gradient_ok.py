"""Cross-entropy with reduction='none', backpropagated with an explicit gradient of ones.

source: https://github.com/linkedin/Liger-Kernel/pull/435
kind: lookalike
verified: the head's weight gets a gradient equal to that of the summed loss
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
head = nn.Linear(8, 5)
criterion = nn.CrossEntropyLoss(reduction="none")
logits = head(torch.randn(12, 8))
output = criterion(logits, torch.randint(0, 5, (12,)))
output.backward(gradient=torch.ones_like(output))
print(head.weight.grad.shape)
