"""Captum on a segmentation_models.pytorch model as the thread answers: agg_segmentation_wrapper calls model(inp) (forward, not the no_grad predict), so LayerGradCam's gradient of the class score with respect to the decoder activation exists.

source: https://github.com/qubvel-org/segmentation_models.pytorch/issues/365
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SegmentationModel(nn.Module):
    def __init__(self, in_channels=3, classes=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.segmentation_head = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        features = self.encoder(x)
        decoder_output = self.decoder(features)
        return self.segmentation_head(decoder_output)

    def predict(self, x):
        if self.training:
            self.eval()
        with torch.no_grad():
            x = self.forward(x)
        return x


class LayerGradCam:
    def __init__(self, forward_func, layer):
        self.forward_func = forward_func
        self.layer = layer

    def attribute(self, inputs, target):
        saved = {}
        handle = self.layer.register_forward_hook(lambda m, i, o: saved.__setitem__("layer", o))
        try:
            output = self.forward_func(inputs)
        finally:
            handle.remove()
        layer_gradients = torch.autograd.grad(torch.unbind(output[:, target]), saved["layer"])[0]
        weights = layer_gradients.mean(dim=(2, 3), keepdim=True)
        return F.relu((weights * saved["layer"]).sum(dim=1, keepdim=True))


torch.manual_seed(0)
model = SegmentationModel()
model.eval()
preproc_img = torch.rand(1, 3, 24, 24)
out_max = torch.argmax(model(preproc_img), dim=1, keepdim=True).detach()


def agg_segmentation_wrapper(inp):
    model_out = model(inp)
    selected_inds = torch.zeros_like(model_out[0:1]).scatter_(1, out_max, 1)
    return (model_out * selected_inds).sum(dim=(2, 3))


lgc = LayerGradCam(agg_segmentation_wrapper, model.decoder[0])
gc_attr = lgc.attribute(preproc_img, target=2)
print("attribution", tuple(gc_attr.shape), gc_attr.sum().item())
