import torch
from models import build_model
from optim import make_optimizer
from engine import run_epoch

model = build_model(32)
optimizer = make_optimizer(model, 1e-2)
ckpt = {"width": 64}
model = build_model(ckpt["width"])  # ROOT
data = [(torch.randn(4, 6), torch.randn(4, 1)) for _ in range(3)]
before = model[0].weight.clone()
run_epoch(model, optimizer, data)
print("moved:", not torch.equal(before, model[0].weight))
