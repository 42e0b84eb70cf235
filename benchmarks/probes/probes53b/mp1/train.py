import torch
from models import MLP
from engine import fit

model = MLP([4, 16, 16, 1])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
before = model.hidden[0].weight.clone()
print(fit(model, opt, data))
print("hidden moved:", not torch.equal(before, model.hidden[0].weight))
