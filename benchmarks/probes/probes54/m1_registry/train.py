import torch
from engine import train_epoch
from registry import build_model, build_optimizer

CFG = {
    "model": {"name": "mlp", "args": {"d_in": 6, "hidden": 12, "d_out": 3}},
    "optim": {"type": "adam", "lr": 1e-2},
    "init_from": {"name": "mlp", "args": {"d_in": 6, "hidden": 12, "d_out": 3}},
}

model = build_model(CFG["model"])
optimizer = build_optimizer(CFG["optim"], model)
if CFG.get("init_from"):
    state = model.state_dict()
    model = build_model(CFG["init_from"])  # ROOT
    model.load_state_dict(state)
before = model.body[0].weight.clone()
batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
train_epoch(model, optimizer, batches)
print("model moved:", not torch.equal(before, model.body[0].weight))
