"""GAIN attention mining: grad_logits = (logits * labels_ohe).sum() is a scalar, but it is backpropagated with gradient=logits * labels_ohe, a batch x classes tensor.

source: https://github.com/ngxbac/GAIN/issues/2
kind: bug
symptom: crash
verified: Mismatch in shape: grad_output[0] has a shape of torch.Size([4, 3]) and output[0] has a shape of torch.Size([])
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GAIN(nn.Module):
    def __init__(self, num_classes=3):
        super(GAIN, self).__init__()
        self.num_classes = num_classes
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.classifier = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))
        self.grad_layer = self.features[0]
        self.feed_forward_features = None
        self.backward_features = None
        self._register_hooks()

    def _register_hooks(self):
        def forward_hook(module, input, output):
            self.feed_forward_features = output

        def backward_hook(module, grad_input, grad_output):
            self.backward_features = grad_output[0]

        self.grad_layer.register_forward_hook(forward_hook)
        self.grad_layer.register_full_backward_hook(backward_hook)

    def _to_ohe(self, labels):
        return F.one_hot(labels, self.num_classes).float()

    def model(self, images):
        return self.classifier(self.features(images))

    def forward(self, images, labels):
        with torch.enable_grad():
            logits = self.model(images)
            self.zero_grad()
            labels_ohe = self._to_ohe(labels)
            gradient = logits * labels_ohe
            grad_logits = (logits * labels_ohe).sum()
            grad_logits.backward(gradient=gradient, retain_graph=True)  # ROOT
            self.zero_grad()
        weights = F.adaptive_avg_pool2d(self.backward_features, 1)
        Ac = F.relu(torch.mul(self.feed_forward_features, weights).sum(dim=1, keepdim=True))
        heatmap = F.interpolate(Ac, size=images.size()[2:], mode='bilinear', align_corners=False)
        return logits, heatmap


torch.manual_seed(0)
model = GAIN(num_classes=3)
images, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,))
logits, heatmap = model(images, labels)
