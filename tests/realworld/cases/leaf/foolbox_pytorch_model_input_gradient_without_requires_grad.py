"""foolbox's `PyTorchModel.predictions_and_gradient` turns the numpy image into a tensor and, on PyTorch >= 0.4 (where `Variable(images, requires_grad=True)` is skipped), never marks it as requiring grad: `loss.backward()` only reaches the model's weights, `images.grad` stays None, and the gradient-based attack that asks for the input gradient fails when the wrapper post-processes it.

source: https://github.com/bethgelab/foolbox/commit/a7ebb1c895ab93d7fa18b07e6004c4c6b1f405fb
kind: bug
symptom: crash
verified: 'NoneType' object has no attribute 'detach'
"""
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
np.random.seed(0)


class PyTorchModel:
    """foolbox's wrapper of a PyTorch classifier: numpy images in, numpy predictions and input gradients out."""

    def __init__(self, model, bounds, num_classes, channel_axis=1):
        self._model = model
        self._bounds = bounds
        self._num_classes = num_classes
        self._channel_axis = channel_axis

    def _old_pytorch(self):
        major, minor = (int(v) for v in torch.__version__.split(".")[:2])
        return (major, minor) < (0, 4)

    def num_classes(self):
        return self._num_classes

    def predictions_and_gradient(self, image, label):
        target = torch.from_numpy(np.array([label]))
        assert image.ndim == 3
        images = torch.from_numpy(image[np.newaxis])  # ROOT
        if self._old_pytorch():
            from torch.autograd import Variable
            target = Variable(target)
            images = Variable(images, requires_grad=True)
        predictions = self._model(images)
        loss = nn.CrossEntropyLoss()(predictions, target)
        loss.backward()
        grad = images.grad
        if not self._old_pytorch():
            predictions = predictions.detach()
        predictions = np.squeeze(predictions.numpy(), axis=0)
        assert predictions.shape == (self.num_classes(),)
        if not self._old_pytorch():
            grad = grad.detach()
        grad = np.squeeze(grad.numpy(), axis=0)
        assert grad.shape == image.shape
        return predictions, grad


class FGSM:
    """Gradient-sign attack: tries increasing epsilons until the label flips."""

    def __init__(self, fmodel):
        self.fmodel = fmodel

    def __call__(self, image, label, epsilons=(0.01, 0.03, 0.1, 0.3)):
        _, gradient = self.fmodel.predictions_and_gradient(image, label)
        min_, max_ = self.fmodel._bounds
        for eps in epsilons:
            perturbed = np.clip(image + eps * np.sign(gradient) * (max_ - min_), min_, max_).astype(np.float32)
            logits = self.fmodel._model(torch.from_numpy(perturbed[np.newaxis])).detach().numpy()[0]
            if logits.argmax() != label:
                return perturbed, eps
        return None, None


net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).eval()
fmodel = PyTorchModel(net, bounds=(0.0, 1.0), num_classes=10)
attack = FGSM(fmodel)
images = np.random.rand(4, 3, 8, 8).astype(np.float32)
for image in images:
    label = int(net(torch.from_numpy(image[np.newaxis])).argmax())
    adversarial, eps = attack(image, label)
    print(f"label {label}: adversarial found at eps {eps}")
