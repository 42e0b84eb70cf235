"""DAFormer: the EMA teacher is updated only by the exponential moving average, and its pseudo-labels and their confidence weights are detached before the student's mixed loss, so mix_loss.backward() sends no gradient into the teacher.

source: https://github.com/lhoyer/DAFormer/issues/59
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def get_model(num_classes=4):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, num_classes, 1))


class DACS:
    def __init__(self, alpha=0.99, pseudo_threshold=0.968):
        self.model = get_model()
        self.ema_model = get_model()
        for param in self.ema_model.parameters():
            param.detach_()
        self.ema_model.load_state_dict(self.model.state_dict())
        self.alpha = alpha
        self.pseudo_threshold = pseudo_threshold
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=6e-5, weight_decay=0.01)

    def _update_ema(self, iter):
        alpha_teacher = min(1 - 1 / (iter + 1), self.alpha)
        for ema_param, param in zip(self.ema_model.parameters(), self.model.parameters()):
            ema_param.data[:] = alpha_teacher * ema_param[:].data[:] + (1 - alpha_teacher) * param[:].data[:]

    def forward_train(self, iter, img, gt_semantic_seg, target_img):
        self._update_ema(iter)
        self.optimizer.zero_grad()
        src_loss = F.cross_entropy(self.model(img), gt_semantic_seg)
        src_loss.backward()

        ema_logits = self.ema_model(target_img)
        ema_softmax = torch.softmax(ema_logits.detach(), dim=1)
        pseudo_prob, pseudo_label = torch.max(ema_softmax, dim=1)
        ps_large_p = pseudo_prob.ge(self.pseudo_threshold).long() == 1
        ps_size = pseudo_label.numel()
        pseudo_weight = torch.sum(ps_large_p).item() / ps_size
        pseudo_weight = pseudo_weight * torch.ones(pseudo_prob.shape)

        mix_masks = (torch.rand(img.shape[0], 1, *img.shape[2:]) > 0.5).float()
        mixed_img = mix_masks * img + (1 - mix_masks) * target_img
        mixed_lbl = torch.where(mix_masks[:, 0] > 0, gt_semantic_seg, pseudo_label)
        mix_loss = (F.cross_entropy(self.model(mixed_img), mixed_lbl, reduction='none') * pseudo_weight).mean()
        mix_loss.backward()
        self.optimizer.step()
        return src_loss.item(), mix_loss.item()


torch.manual_seed(0)
dacs = DACS(pseudo_threshold=0.3)
for it in range(3):
    img, gt = torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2, 16, 16))
    print(dacs.forward_train(it, img, gt, torch.randn(2, 3, 16, 16)))
print(all(p.grad is None for p in dacs.ema_model.parameters()))
