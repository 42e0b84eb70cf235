"""kaolin's sg_warp_specular_term normalizes the half vector in place, h /= torch.sqrt(_dot(h, h)), after _dot(h, h) computed h * h and saved h for its gradient: as soon as anything upstream of h (the surface normal or roughness being optimized) requires grad, backward through the specular shading fails.

source: https://github.com/NVIDIAGameWorks/kaolin/issues/832
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import math

import torch


def _dot(a, b):
    """Compute dot product of two tensors on the last axis."""
    return torch.sum(a * b, dim=-1, keepdim=True)


def _reflect(direction, normal):
    return direction - 2 * _dot(direction, normal) * normal


def _ggx_v1(m2, nDotX):
    return 1. / (nDotX + torch.sqrt(m2 + (1. - m2) * nDotX * nDotX))


def fresnel(ldh, spec_albedo):
    powTerm = torch.pow((1. - ldh), 5)
    return spec_albedo + (1. - spec_albedo) * powTerm


def sg_distribution_term(direction, roughness):
    m2 = roughness * roughness
    sharpness = 2. / m2
    amplitude = (1. / (math.pi * m2)).unsqueeze(-1).expand(-1, 3)
    return amplitude, direction, sharpness


def sg_warp_distribution(amplitude, direction, sharpness, view):
    warp_direction = _reflect(-view, direction)
    warp_sharpness = sharpness / (4. * torch.clamp(_dot(direction, view).squeeze(-1), min=1e-4))
    return amplitude, warp_direction, warp_sharpness


def unbatched_reduced_sg_inner_product(amplitude, direction, sharpness,
                                       other_amplitude, other_direction, other_sharpness):
    # the unfused path kaolin takes for fewer than 8 lobes (unbatched_sg_inner_product(...).sum(1))
    num_sg, num_other = amplitude.shape[0], other_amplitude.shape[0]
    amplitude, direction, sharpness = amplitude.reshape(num_sg, 1, 3), direction.reshape(num_sg, 1, 3), sharpness.reshape(num_sg, 1, 1)
    other_amplitude = other_amplitude.reshape(1, num_other, 3)
    other_direction = other_direction.reshape(1, num_other, 3)
    other_sharpness = other_sharpness.reshape(1, num_other, 1)
    dm = (sharpness * direction + other_sharpness * other_direction)
    dm = torch.sqrt(_dot(dm, dm))
    lm = sharpness + other_sharpness
    expo = torch.exp(dm - lm) * (amplitude * other_amplitude)
    other = 1.0 - torch.exp(-2.0 * dm)
    return (2.0 * math.pi * expo * other / dm).sum(1)


def sg_warp_specular_term(amplitude, direction, sharpness, normal, roughness, view, spec_albedo):
    ndf_amplitude, ndf_direction, ndf_sharpness = sg_distribution_term(normal, roughness)
    ndf_amplitude, ndf_direction, ndf_sharpness = sg_warp_distribution(ndf_amplitude, ndf_direction, ndf_sharpness, view)
    ndl = torch.clamp(_dot(normal, ndf_direction), min=0., max=1.)
    ndv = torch.clamp(_dot(normal, view), min=0., max=1.)
    h = ndf_direction + view
    h /= torch.sqrt(_dot(h, h))  # ROOT
    ldh = torch.clamp(_dot(ndf_direction, h), min=0., max=1.)
    output = unbatched_reduced_sg_inner_product(ndf_amplitude, ndf_direction, ndf_sharpness, amplitude, direction, sharpness)
    m2 = (roughness * roughness).unsqueeze(-1)
    output *= _ggx_v1(m2, ndl) * _ggx_v1(m2, ndv)
    output *= fresnel(ldh, spec_albedo)
    output *= ndl
    return torch.clamp(output, min=0.)


torch.manual_seed(0)
num_points = 64
base_normal = torch.nn.functional.normalize(torch.randn(num_points, 3) + torch.tensor([0., 0., 3.]), dim=-1)
view = torch.nn.functional.normalize(torch.randn(num_points, 3) + torch.tensor([0., 0., 3.]), dim=-1)
amplitude, direction = torch.rand(4, 3), torch.nn.functional.normalize(torch.randn(4, 3) + torch.tensor([0., 0., 2.]), dim=-1)
sharpness = torch.full((4,), 5.)
target = torch.rand(num_points, 3) * 0.1

normal_offset = torch.nn.Parameter(torch.zeros(num_points, 3))  # the material being fitted: a normal map,
roughness_logit = torch.nn.Parameter(torch.zeros(num_points))  # a roughness map
spec_albedo = torch.nn.Parameter(torch.full((num_points, 3), 0.04))  # and a specular albedo map
optimizer = torch.optim.Adam([normal_offset, roughness_logit, spec_albedo], lr=1e-2)
for it in range(5):
    normal = torch.nn.functional.normalize(base_normal + normal_offset, dim=-1)
    roughness = torch.sigmoid(roughness_logit) * 0.9 + 0.05
    spec = sg_warp_specular_term(amplitude, direction, sharpness, normal, roughness, view, spec_albedo)
    loss = torch.nn.functional.mse_loss(spec, target)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
    print("iter", it, "loss", round(loss.item(), 6))
