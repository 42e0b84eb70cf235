"""A correct training loop with the look-alikes of every bug above: gradtrace stays silent."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(10, 10) for _ in range(3)])
        self.head = nn.Linear(10, 3)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)


model = Net()
ema = Net().requires_grad_(False)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(8)]

for epoch in range(2):
    model.train()
    running = 0.0
    for inputs, labels in data:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running += loss.item()
        with torch.no_grad():
            for p_ema, p in zip(ema.parameters(), model.parameters()):
                p_ema.mul_(0.99).add_(p.detach(), alpha=0.01)
    model.eval()
    with torch.no_grad():
        accuracy = (model(data[0][0]).argmax(1) == data[0][1]).float().mean().item()
    print(f"epoch {epoch}: loss {running / len(data):.3f}, accuracy {accuracy:.2f}")
