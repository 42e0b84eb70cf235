import torch
import torch.nn as nn
from callbacks import GradientClip, ResetGrads
from learner import Learner

model = nn.Sequential(nn.Linear(7, 16), nn.ReLU(), nn.Linear(16, 1))
data = [(torch.randn(8, 7), torch.randn(8, 1)) for _ in range(4)]
learn = Learner(model, data, nn.MSELoss(), torch.optim.SGD, 0.1, cbs=[ResetGrads(), GradientClip()])
w0 = model[0].weight.clone()
learn.fit(2)
print("moved:", (model[0].weight - w0).abs().max().item())
