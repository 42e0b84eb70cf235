"""AdversarialDeepFakes robust FGSM: the Normalize transform does `for t, m, s in zip(tensor, mean, std): t.sub_(m).div_(s)` on the resized adversarial image, which requires grad; iterating unbinds it and in-place ops on unbind outputs are refused.

source: https://github.com/paarthneekhara/AdversarialDeepFakes/issues/23
kind: bug
symptom: crash
verified: is a view and is being modified inplace. This view is the output of a function that returns multiple views
"""
import torch
import torch.nn as nn
from torch import autograd


class Normalize(object):
    def __init__(self, mean, std):
        self.mean = mean
        self.std = std

    def __call__(self, tensor):
        for t, m, s in zip(tensor, self.mean, self.std):
            t.sub_(m).div_(s)  # ROOT
        return tensor


norm_transform = Normalize([0.5] * 3, [0.5] * 3)


def predict_with_model(preprocessed_image, model, post_function=nn.Softmax(dim=1)):
    resized_image = nn.functional.interpolate(preprocessed_image, size=(16, 16), mode="bilinear",
                                              align_corners=True)
    normalized_image = norm_transform(resized_image)
    logits = model(normalized_image)
    output = post_function(logits)
    _, prediction = torch.max(output, 1)
    return int(prediction.item()), output, logits


def robust_fgsm(input_img, model, max_iter=3, alpha=1 / 255.0, eps=16 / 255.0):
    input_var = autograd.Variable(input_img, requires_grad=True)
    target_var = autograd.Variable(torch.LongTensor([0]))
    loss_criterion = nn.CrossEntropyLoss()
    for iter_no in range(max_iter):
        prediction, output, logits = predict_with_model(input_var, model)
        loss = loss_criterion(logits, target_var)
        loss.backward()
        step_adv = input_var.detach() + alpha * torch.sign(input_var.grad.data)
        total_pert = torch.clamp(step_adv - input_img, -eps, eps)
        input_var.data = input_img + total_pert
        input_var.grad.data.zero_()
    return input_var


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)).eval()
processed_image = torch.rand(1, 3, 24, 24)
perturbed_image = robust_fgsm(processed_image, model)
