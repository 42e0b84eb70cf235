"""DeepFool attack: the perturbed image of the previous iteration is marked requires_grad again.

source: https://github.com/Harry24k/adversarial-attacks-pytorch/issues/2
kind: bug
symptom: crash
verified: RuntimeError: you can only change requires_grad flags of leaf variables.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3)).eval()


def deepfool(image, steps=3, overshoot=0.02):
    image = image.clone()
    label = model(image).argmax(1)
    for _ in range(steps):
        image.requires_grad = True  # SYMPTOM
        fs = model(image)[0]
        if fs.argmax() != label:
            break
        others = [k for k in range(3) if k != label.item()]
        k = others[0]
        f_diff = fs[k] - fs[label.item()]
        w = torch.autograd.grad(f_diff, image)[0]
        r = (abs(f_diff) + 1e-4) * w / w.norm()
        image = torch.clamp(image + (1 + overshoot) * r, 0, 1)  # ROOT
    return image


adv = deepfool(torch.rand(1, 3, 2, 2))
print(adv.shape)
