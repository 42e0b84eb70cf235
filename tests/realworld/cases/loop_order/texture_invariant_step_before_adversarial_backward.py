"""GTA->Cityscapes adaptation: optimizer.step() runs before loss_adv.backward(), so the adversarial loss never trains the model.

source: https://github.com/MyeongJin-Kim/Learning-Texture-Invariant-Representation/issues/11
kind: bug
symptom: silent
verified: the segmentation weights are identical with lambda_adv=0.001 and lambda_adv=0 (the adversarial grads are zeroed first)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def train(lambda_adv, num_steps=3):
    torch.manual_seed(0)
    model = nn.Conv2d(3, 4, 3, padding=1)
    model_D = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3, padding=1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    optimizer_D = torch.optim.Adam(model_D.parameters(), lr=1e-4, betas=(0.9, 0.99))
    bce_loss = nn.BCEWithLogitsLoss()
    source_adv_label, target_adv_label = 0, 1
    for i_iter in range(num_steps):
        optimizer.zero_grad()
        optimizer_D.zero_grad()
        for param in model_D.parameters():
            param.requires_grad = False
        image_source, label = torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 8, 8))
        pred_source = model(image_source)
        loss_seg_source = F.cross_entropy(pred_source, label)
        loss_seg_source.backward()
        optimizer.step()  # ROOT
        image_target = torch.randn(2, 3, 8, 8)
        pred_target = model(image_target)
        D_output_target = model_D(F.softmax(pred_target, dim=1))
        loss_adv = bce_loss(D_output_target, torch.full_like(D_output_target, source_adv_label))
        loss_adv = loss_adv * lambda_adv
        loss_adv.backward()
        for param in model_D.parameters():
            param.requires_grad = True
        D_out_s = model_D(F.softmax(pred_source.detach(), dim=1))
        D_out_t = model_D(F.softmax(pred_target.detach(), dim=1))
        loss_D = (bce_loss(D_out_s, torch.full_like(D_out_s, source_adv_label))
                  + bce_loss(D_out_t, torch.full_like(D_out_t, target_adv_label))) / 2
        loss_D.backward()
        optimizer_D.step()
    return model.weight.detach()


print("adversarial loss had no effect:", torch.equal(train(lambda_adv=0.001), train(lambda_adv=0.0)))
