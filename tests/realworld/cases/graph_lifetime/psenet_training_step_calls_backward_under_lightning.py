"""The reporter added loss.backward() at the end of PSENet's training_step; PSENet is a LightningModule with automatic optimization, so Lightning calls backward on the returned loss again ("the loss.backward() will be handled automatically by the library. Putting this line into training code will cause error"), and the second backward finds the graph already freed.

source: https://github.com/VinAIResearch/PSENet-Image-Enhancement/issues/1
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn


class UnetTMO(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward(self, im):
        pred_gamma = torch.sigmoid(self.net(im)) * 2 + 0.1
        return im.clamp(1e-4, 1) ** pred_gamma, pred_gamma


class TVLoss(nn.Module):
    def forward(self, x):
        return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


class IQA(nn.Module):
    def forward(self, im):
        return -(im.mean(1, keepdim=True) - 0.5).abs()  # well-exposedness score per pixel


class PSENet(nn.Module):
    def __init__(self, tv_w=1.0, gamma_lower=-2, gamma_upper=3, number_refs=1, lr=1e-3):
        super().__init__()
        self.tv_w, self.gamma_lower, self.gamma_upper = tv_w, gamma_lower, gamma_upper
        self.number_refs, self.lr = number_refs, lr
        self.model = UnetTMO()
        self.mse = nn.MSELoss()
        self.tv = TVLoss()
        self.iqa = IQA()
        self.saved_input = None
        self.saved_pseudo_gt = None

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.lr, betas=[0.9, 0.99])

    def generate_pseudo_gt(self, im):
        bs, ch, h, w = im.shape
        underexposed_ranges = torch.linspace(0, self.gamma_upper, steps=self.number_refs)
        underexposed_gamma = torch.exp(torch.rand([bs, self.number_refs]) * underexposed_ranges[None, :])
        overrexposed_ranges = torch.linspace(self.gamma_lower, 0, steps=self.number_refs)
        overrexposed_gamma = torch.exp(torch.rand([bs, self.number_refs]) * overrexposed_ranges[None, :])
        gammas = torch.cat([underexposed_gamma, overrexposed_gamma], dim=1)
        synthetic_references = 1 - (1 - im[:, None]) ** gammas[:, :, None, None, None]
        previous_iter_output = self.model(im)[0].clone().detach()
        references = torch.cat([im[:, None], previous_iter_output[:, None], synthetic_references], dim=1)
        nref = references.shape[1]
        scores = self.iqa(references.view(bs * nref, ch, h, w)).view(bs, nref, 1, h, w)
        max_idx = torch.argmax(scores, dim=1).repeat(1, ch, 1, 1)[:, None]
        return torch.gather(references, 1, max_idx).squeeze(1)

    def training_step(self, batch, batch_idx):
        nth_input = batch
        nth_pseudo_gt = self.generate_pseudo_gt(batch)
        if self.saved_input is not None:
            im = self.saved_input
            pred_im, pred_gamma = self.model(im)
            pseudo_gt = self.saved_pseudo_gt
            reconstruction_loss = self.mse(pred_im, pseudo_gt)
            tv_loss = self.tv(pred_gamma)
            loss = reconstruction_loss + tv_loss * self.tv_w
            loss.backward()  # ROOT
        else:
            loss = None
        self.saved_input = nth_input
        self.saved_pseudo_gt = nth_pseudo_gt
        return loss


class Trainer:
    """Lightning's automatic optimization: training_step, zero_grad, backward, step."""

    def fit(self, model, train_dataloader):
        optimizer = model.configure_optimizers()
        for batch_idx, batch in enumerate(train_dataloader):
            loss = model.training_step(batch, batch_idx)
            if loss is None:
                continue
            optimizer.zero_grad()
            loss.backward()  # SYMPTOM
            optimizer.step()
            print(batch_idx, loss.item())


torch.manual_seed(0)
Trainer().fit(PSENet(), [torch.rand(2, 3, 16, 16) for _ in range(4)])
