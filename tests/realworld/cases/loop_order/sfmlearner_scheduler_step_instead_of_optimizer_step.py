"""SfMLearner training with --scheduler calls scheduler.step() in place of optimizer.step(), so the weights never change.

source: https://github.com/ClementPinard/SfmLearner-Pytorch/issues/5
kind: bug
symptom: silent
verified: after 5 iterations with a scheduler the disparity network weights are unchanged (max abs change 0.0) and the loss stays flat
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
    if scheduler:
        scheduler.step()  # ROOT
    else:
        optimizer.step()
    print(i, loss.item())
print((disp_net[0].weight - before).abs().max().item())
