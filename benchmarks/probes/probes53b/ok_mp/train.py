import torch
import torch.nn.functional as F
from models import Classifier, freeze_backbone

model = freeze_backbone(Classifier())
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
h = None
for _ in range(3):
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
