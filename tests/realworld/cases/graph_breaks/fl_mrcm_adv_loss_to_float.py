"""Federated MRI reconstruction: the adversarial loss is detached into a float before it joins the loss.

source: https://github.com/guopengf/FL-MRCM/issues/10
kind: bug
symptom: silent
verified: the reconstruction net gets the same gradient with or without the adversarial term
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
recon_net = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
discriminator = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.Adam(recon_net.parameters(), lr=1e-3)
criterion_adv = nn.BCEWithLogitsLoss()
batch_loss_adv = []

kspace, target = torch.randn(4, 16), torch.randn(4, 16)
output = recon_net(kspace)
loss_rec = nn.functional.l1_loss(output, target)
loss_adv_g = criterion_adv(discriminator(output), torch.ones(4, 1))
loss_adv_g = loss_adv_g.detach().item()  # ROOT
batch_loss_adv.append(loss_adv_g)
loss = loss_rec + 0.01 * loss_adv_g
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(type(loss_adv_g), discriminator[0].weight.grad)
