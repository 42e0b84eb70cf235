import torch
import torch.nn.functional as F
from models import build_model

model = build_model(3)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
head = model[2].state_dict()
model = build_model(3, pretrained_head=head)  # ROOT
for _ in range(3):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
