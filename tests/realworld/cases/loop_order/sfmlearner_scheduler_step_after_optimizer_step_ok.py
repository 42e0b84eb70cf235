"""SfMLearner training with --scheduler calls optimizer.step() on every iteration and scheduler.step() after it.

source: https://github.com/ClementPinard/SfmLearner-Pytorch/issues/5
kind: lookalike
"""
import torch
import torch.nn as nn


class args:
    lr = 2e-4
    scheduler = 'step'


torch.manual_seed(0)
disp_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1), nn.Sigmoid())
optimizer = torch.optim.Adam(disp_net.parameters(), lr=args.lr, betas=(0.9, 0.999))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5) if args.scheduler else None
tgt_img, ref_depth = torch.rand(4, 3, 16, 16), torch.rand(4, 1, 16, 16)
before = disp_net[0].weight.detach().clone()
for i in range(5):
    loss = (disp_net(tgt_img) - ref_depth).abs().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if scheduler:
        scheduler.step()
    print(i, loss.item())
print((disp_net[0].weight - before).abs().max().item())
