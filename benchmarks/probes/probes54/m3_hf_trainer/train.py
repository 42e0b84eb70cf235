import torch
import torch.nn as nn
from weighted import PerSampleWeightedTrainer

model = nn.Linear(5, 3)
data = [{"x": torch.randn(4, 5), "labels": torch.randint(0, 3, (4,)), "w": torch.rand(4)} for _ in range(2)]
PerSampleWeightedTrainer(model, data).train()
