"""mmrotate GWD loss: the Wasserstein distance is clamp(0).sqrt()'d, so a box predicted exactly gives NaN gradients.

source: https://github.com/open-mmlab/mmrotate/issues/205
kind: bug
symptom: silent
verified: pred.grad is NaN for the box that matches its target (sqrt of a zero distance)
"""
import torch


def xy_wh_r_2_xy_sigma(xywhr):
    xy = xywhr[..., :2]
    wh = xywhr[..., 2:4].clamp(min=1e-7, max=1e7)
    r = xywhr[..., 4]
    cos_r, sin_r = torch.cos(r), torch.sin(r)
    R = torch.stack((cos_r, -sin_r, sin_r, cos_r), dim=-1).reshape(-1, 2, 2)
    S = 0.5 * torch.diag_embed(wh)
    sigma = R.bmm(S.square()).bmm(R.permute(0, 2, 1))
    return xy, sigma


def gwd_loss(pred, target, fun='log1p', tau=1.0, alpha=1.0):
    xy_p, Sigma_p = xy_wh_r_2_xy_sigma(pred)
    xy_t, Sigma_t = xy_wh_r_2_xy_sigma(target)
    xy_distance = (xy_p - xy_t).square().sum(dim=-1)
    whr_distance = Sigma_p.diagonal(dim1=-2, dim2=-1).sum(dim=-1)
    whr_distance = whr_distance + Sigma_t.diagonal(dim1=-2, dim2=-1).sum(dim=-1)
    _t_tr = (Sigma_p.bmm(Sigma_t)).diagonal(dim1=-2, dim2=-1).sum(dim=-1)
    _t_det_sqrt = (Sigma_p.det() * Sigma_t.det()).clamp(0).sqrt()
    whr_distance = whr_distance + (-2) * ((_t_tr + 2 * _t_det_sqrt).clamp(0).sqrt())
    distance = (xy_distance + alpha * alpha * whr_distance).clamp(0).sqrt()  # ROOT
    if fun == 'log1p':
        distance = torch.log1p(distance)
    return 1 - 1 / (tau + distance)


torch.manual_seed(0)
target = torch.tensor([[10., 10., 4., 2., 0.3], [20., 5., 6., 3., -0.2]])
pred = target.clone()
pred[1, :2] += torch.randn(2)
pred.requires_grad_()
optimizer = torch.optim.SGD([pred], lr=0.1)
loss = gwd_loss(pred, target).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
