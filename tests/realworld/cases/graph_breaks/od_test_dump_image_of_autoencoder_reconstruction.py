"""OD-test's `IterativeTrainer.run_epoch`, with `dump_images` on for an autoencoder run, saves the first input of each batch and its reconstruction through the `dump_image` helper. In the training phase the reconstruction `prediction[0].cpu()` is still part of the autograd graph, and `dump_image` hands it straight to `plt.imshow`, which converts it to a numpy array: the first batch of the first training epoch fails.

source: https://github.com/ashafaei/OD-test/commit/0dd69c6ff0d47a2ccea0d45af26ca10a3c74250a
kind: bug
symptom: crash
verified: Can't call numpy() on Tensor that requires grad
"""
import os
import tempfile
import types

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

torch.manual_seed(0)


class ConvAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
        self.decoder = nn.Sequential(nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(8, 1, 4, 2, 1),
                                     nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


class IterativeTrainer:
    def __init__(self, config, args):
        self.config = config
        self.args = args
        self.device = args.device
        defaults = {"classification": False, "autoencoder_target": False, "stochastic_gradient": True}
        for key, value in defaults.items():
            if not hasattr(self.config, key):
                setattr(self.config, key, value)

    def run_epoch(self, epoch, phase="train"):
        config = self.config.phases[phase]
        dataset, backward = config["dataset"], config["backward"]
        model, criterion, optimizer = self.config.model, self.config.criterion, self.config.optim
        dump_path = os.path.join(self.args.home_path, "dump")
        os.makedirs(dump_path, exist_ok=True)

        if backward:
            model.train()
            torch.set_grad_enabled(True)
        else:
            model.eval()
            torch.set_grad_enabled(False)

        losses = []
        for i, (image, label) in enumerate(dataset):
            if backward:
                optimizer.zero_grad()
            input, target = image, label
            if self.config.autoencoder_target:
                target = input.clone()
            input, target = input.to(self.device), target.to(self.device)
            prediction = model(input)
            loss = criterion(prediction, target)

            if self.args.dump_images and self.config.autoencoder_target:
                filename = f"{phase}{i}_epoch{epoch}.png"
                self.dump_image(input[0].cpu(), os.path.join(dump_path, filename), True)
                filename = f"{phase}{i}_epoch{epoch}_target.png"
                self.dump_image(prediction[0].cpu(), os.path.join(dump_path, filename), True)

            if backward:
                loss.backward()
                optimizer.step()
            losses.append(loss.item())
        torch.set_grad_enabled(True)
        print(f"  {phase} epoch {epoch}: loss {sum(losses) / len(losses):.4f}")

    def dump_image(self, imageTensor, path, force_grayscale=False):
        image_n = imageTensor.permute(1, 2, 0)
        plt.figure(figsize=(1, 1), dpi=32)
        plt.imshow(image_n)  # ROOT
        if force_grayscale:
            plt.gray()
        plt.savefig(path)
        plt.close()


images = torch.rand(48, 1, 16, 16)
labels = torch.randint(0, 10, (48,))
model = ConvAutoencoder()
config = types.SimpleNamespace(
    model=model, criterion=nn.BCELoss(), optim=torch.optim.Adam(model.parameters(), lr=1e-3), autoencoder_target=True,
    phases={"train": {"dataset": DataLoader(TensorDataset(images[:32], labels[:32]), batch_size=16, shuffle=True),
                      "backward": True},
            "test": {"dataset": DataLoader(TensorDataset(images[32:], labels[32:]), batch_size=16),
                     "backward": False}})
with tempfile.TemporaryDirectory() as home:
    args = types.SimpleNamespace(device="cpu", dump_images=True, home_path=home)
    trainer = IterativeTrainer(config, args)
    for epoch in range(1):
        trainer.run_epoch(epoch, "train")
        trainer.run_epoch(epoch, "test")
    print(f"dumped images: {len(os.listdir(os.path.join(home, 'dump')))}")
