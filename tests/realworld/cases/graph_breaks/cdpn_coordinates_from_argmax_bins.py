"""CDPN training: the coordinate loss is taken after argmax over the bins, so backward has nothing to follow.

source: https://github.com/LZGMatrix/BOP19_CDPN_2019ICCV/issues/4
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn

coor_bin = 8
torch.manual_seed(0)
backbone = nn.Conv2d(3, 3 * (coor_bin + 1), 3, padding=1)
optimizer = torch.optim.Adam(backbone.parameters(), lr=1e-4)

inp = torch.randn(1, 3, 16, 16)
target_coor = torch.rand(16, 16, 3) * 2 - 1
for it in range(2):
    out = backbone(inp)
    output_coor_x_, output_coor_y_, output_coor_z_ = out.split(coor_bin + 1, dim=1)
    output_coor_x_ = output_coor_x_.squeeze()
    output_coor_y_ = output_coor_y_.squeeze()
    output_coor_z_ = output_coor_z_.squeeze()
    output_coor_ = torch.stack([torch.argmax(output_coor_x_, axis=0),  # ROOT
                                torch.argmax(output_coor_y_, axis=0),
                                torch.argmax(output_coor_z_, axis=0)], axis=2)
    output_coor_[output_coor_ == coor_bin] = 0
    output_coor_ = 2.0 * output_coor_.float() / (coor_bin - 1.0) - 1.0
    loss = nn.functional.l1_loss(output_coor_, target_coor)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
