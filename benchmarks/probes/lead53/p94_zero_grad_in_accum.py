import torch
import torch.nn as nn

model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
accum = 4
batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(8)]
for i, (x, y) in enumerate(batches):
    opt.zero_grad()  # ROOT
    loss = nn.functional.mse_loss(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step()
