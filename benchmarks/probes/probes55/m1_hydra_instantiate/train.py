import torch
import torch.nn.functional as F
from experiment import CONFIG, Experiment

exp = Experiment(CONFIG)
exp.setup("fit")
w0 = exp.model.weight.clone()
for _ in range(5):
    x, y = torch.randn(16, 6), torch.randint(0, 2, (16,))
    loss = F.cross_entropy(exp.model(x), y)
    exp.optimizer.zero_grad()
    loss.backward()
    exp.optimizer.step()
print("moved:", (exp.model.weight - w0).abs().max().item())
