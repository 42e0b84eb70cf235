import os
import tempfile
import torch
import torch.nn as nn


def make_net():
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))


def maybe_resume(model, path):
    if path and os.path.exists(path):
        model = make_net()  # ROOT
        model.load_state_dict(torch.load(path))
    return model


def main():
    ckpt = os.path.join(tempfile.mkdtemp(), "last.pt")
    torch.save(make_net().state_dict(), ckpt)
    model = make_net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = maybe_resume(model, ckpt)  # ROOT (the call; added after first contact, see lead54.md)
    w0 = model[0].weight.clone()
    for _ in range(4):
        x = torch.randn(16, 3)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("moved:", not torch.equal(w0, model[0].weight))


if __name__ == "__main__":
    main()
