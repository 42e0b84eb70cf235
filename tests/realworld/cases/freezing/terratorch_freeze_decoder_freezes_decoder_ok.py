"""TerraTorch's `PixelWiseModel.freeze_decoder()` after its fix: it freezes the decoder and the head, so a segmentation task configured with `freeze_decoder=True` fine-tunes the encoder on top of the kept decoder.

source: https://github.com/torchgeo/terratorch/pull/189
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def freeze_module(module):
    for param in module.parameters():
        param.requires_grad_(False)


class PixelWiseModel(nn.Module):
    def __init__(self, in_channels=4, num_classes=3):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(nn.ConvTranspose2d(16, 16, 2, stride=2), nn.ReLU())
        self.head = nn.Conv2d(16, num_classes, 1)

    def freeze_encoder(self):
        freeze_module(self.encoder)

    def freeze_decoder(self):
        freeze_module(self.decoder)
        freeze_module(self.head)

    def forward(self, x):
        return self.head(self.decoder(self.encoder(x)))


class SemanticSegmentationTask:
    def __init__(self, model, freeze_backbone=False, freeze_decoder=False, lr=0.05):
        self.model = model
        if freeze_backbone:
            model.freeze_encoder()
        if freeze_decoder:
            model.freeze_decoder()
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(trainable, lr=lr, momentum=0.9)

    def training_step(self, images, masks):
        loss = nn.functional.cross_entropy(self.model(images), masks)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def flat(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()]).clone()


def main():
    model = PixelWiseModel()
    encoder_before, decoder_before = flat(model.encoder), flat(model.decoder)
    task = SemanticSegmentationTask(model, freeze_decoder=True)
    images = torch.randn(8, 4, 16, 16)
    masks = (images[:, :3].argmax(dim=1))
    for _ in range(20):
        loss = task.training_step(images, masks)
    print("final loss:", round(loss, 4))
    print("encoder change:", round((flat(model.encoder) - encoder_before).norm().item(), 4))
    print("decoder change:", round((flat(model.decoder) - decoder_before).norm().item(), 4))


if __name__ == "__main__":
    main()
