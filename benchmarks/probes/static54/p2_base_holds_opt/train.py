import torch

from trainer import Trainer

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
w0 = model.weight.detach().clone()
data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
Trainer(model).train(data)
print("moved:", not torch.equal(w0, model.weight))
