"""HiDDeN's JpegCompression noise layer takes each channel as image[:, channel].unsqueeze_(1), an in-place unsqueeze of a view that bumps the version of the whole image; the convolution saved the previous channel's view for backward, so the encoder-decoder training step fails in backward.

source: https://github.com/ando-khachatryan/HiDDeN/issues/23
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def gen_filters(size_x, size_y, dct_or_idct_fun):
    tile_size_x = 8
    filters = np.zeros((size_x * size_y, size_x, size_y))
    for k_y in range(size_y):
        for k_x in range(size_x):
            for n_y in range(size_y):
                for n_x in range(size_x):
                    filters[k_y * tile_size_x + k_x, n_y, n_x] = dct_or_idct_fun(n_y, k_y, size_y) * dct_or_idct_fun(n_x, k_x, size_x)
    return filters


def dct_coeff(n, k, N):
    return np.cos(np.pi / N * (n + 1. / 2.) * k)


def idct_coeff(n, k, N):
    return (int(0 == n) * (- 1 / 2) + np.cos(np.pi / N * (k + 1. / 2.) * n)) * np.sqrt(1 / (2. * N))


class JpegCompression(nn.Module):
    """HiDDeN's differentiable JPEG noise layer, cut down to the DCT / mask / inverse-DCT path."""

    def __init__(self, keep=25):
        super(JpegCompression, self).__init__()
        self.dct_conv_weights = torch.tensor(gen_filters(8, 8, dct_coeff), dtype=torch.float32).unsqueeze_(1)
        self.idct_conv_weights = torch.tensor(gen_filters(8, 8, idct_coeff), dtype=torch.float32).unsqueeze_(1)
        self.keep = keep

    def apply_conv(self, image, filter_type):
        filters = self.dct_conv_weights if filter_type == 'dct' else self.idct_conv_weights
        image_conv_channels = []
        for channel in range(image.shape[1]):
            image_yuv_ch = image[:, channel, :, :].unsqueeze_(1)  # ROOT
            image_conv = F.conv2d(image_yuv_ch, filters, stride=8)
            image_conv = image_conv.permute(0, 2, 3, 1)
            image_conv = image_conv.view(image_conv.shape[0], image_conv.shape[1], image_conv.shape[2], 8, 8)
            image_conv = image_conv.permute(0, 1, 3, 2, 4)
            image_conv = image_conv.contiguous().view(image_conv.shape[0], image_conv.shape[1] * image_conv.shape[2],
                                                      image_conv.shape[3] * image_conv.shape[4])
            image_conv.unsqueeze_(1)
            image_conv_channels.append(image_conv)
        return torch.cat(image_conv_channels, dim=1)

    def forward(self, noised_image):
        image_dct = self.apply_conv(noised_image, 'dct')
        mask = torch.zeros(8, 8)
        mask.view(-1)[:self.keep] = 1
        mask = mask.repeat(image_dct.shape[2] // 8, image_dct.shape[3] // 8)
        return self.apply_conv(torch.mul(image_dct, mask), 'idct')


torch.manual_seed(0)
encoder = nn.Sequential(nn.Conv2d(3 + 8, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 1))
decoder = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 8))
noiser = JpegCompression()
optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
for step in range(3):
    images, messages = torch.rand(2, 3, 16, 16), torch.randint(0, 2, (2, 8)).float()
    expanded = messages[:, :, None, None].expand(-1, -1, 16, 16)
    encoded_images = encoder(torch.cat([images, expanded], dim=1))
    decoded_messages = decoder(noiser(encoded_images))
    loss = F.mse_loss(encoded_images, images) + F.mse_loss(decoded_messages, messages)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
print(step, loss.item())
