"""An MLP whose hidden layers are built with map() into a plain list: they are never registered."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.hidden = list(map(nn.Linear, dims[:-2], dims[1:-1]))  # ROOT
        self.out = nn.Linear(dims[-2], dims[-1])

    def forward(self, x):
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.out(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MLP([6, 32, 32, 1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = model.hidden[0].weight.detach().clone()
    for _ in range(20):
        x = torch.randn(32, 6)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("hidden layer moved:", not torch.equal(first, model.hidden[0].weight))
