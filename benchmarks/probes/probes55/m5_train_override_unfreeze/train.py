import torch
import torch.nn.functional as F
from model import FineTuner

model = FineTuner().freeze_backbone()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
b0 = model.backbone[0].weight.clone()
for epoch in range(2):
    model.train()
    for _ in range(3):
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
print("frozen backbone moved:", (model.backbone[0].weight - b0).abs().max().item())
