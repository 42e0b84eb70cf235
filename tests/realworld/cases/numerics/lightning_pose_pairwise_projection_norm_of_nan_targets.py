"""lightning-pose's PairwiseProjectionsLoss computes torch.linalg.norm(targets.unsqueeze(1) - predictions) on targets that hold NaN for keypoints without a 3D annotation and drops the NaN losses afterwards with masked_select: the masked entries get a zero upstream gradient, but the norm's backward still multiplies it by the NaN difference, so every parameter of the network gets a NaN gradient (the loss itself is finite).

source: https://github.com/paninski-lab/lightning-pose/pull/358
kind: bug
symptom: silent
verified: with one of 20 target keypoints missing (NaN) the loss is a finite 1.5071 but 408 of the 768 entries of the first layer's grad are NaN and the weights are no longer finite after one Adam step; with the NaN targets and predictions replaced before the norm (the fix) the grad has no NaN at the same loss
"""
import torch


class PairwiseProjectionsLoss(torch.nn.Module):  # lightning-pose's Loss base reduced to weight and mean reduction
    def __init__(self, weight=1.0):
        super().__init__()
        self.weight = weight

    def remove_nans(self, loss):
        mask = ~torch.isnan(loss)
        if mask.sum() == 0.0:
            return torch.tensor(0.0, device=loss.device, dtype=loss.dtype)
        else:
            return torch.masked_select(loss, ~torch.isnan(loss))

    def compute_loss(self, targets, predictions):
        loss = torch.linalg.norm(targets.unsqueeze(1) - predictions, ord=2, dim=-1)  # ROOT
        return loss

    def __call__(self, keypoints_targ_3d, keypoints_pred_3d):
        elementwise_loss = self.compute_loss(targets=keypoints_targ_3d, predictions=keypoints_pred_3d)
        clean_loss = self.remove_nans(loss=elementwise_loss)
        scalar_loss = torch.mean(clean_loss)
        return self.weight * scalar_loss


class MultiviewHead(torch.nn.Module):  # stands for the backbone + per-camera-pair triangulation: (batch, cam_pairs, K, 3)
    def __init__(self, in_features=24, cam_pairs=3, num_keypoints=5):
        super().__init__()
        self.cam_pairs, self.num_keypoints = cam_pairs, num_keypoints
        self.net = torch.nn.Sequential(torch.nn.Linear(in_features, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, cam_pairs * num_keypoints * 3))

    def forward(self, x):
        return self.net(x).view(-1, self.cam_pairs, self.num_keypoints, 3)


torch.manual_seed(0)
model = MultiviewHead()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = PairwiseProjectionsLoss()
features, keypoints_targ_3d = torch.randn(4, 24), torch.randn(4, 5, 3)
keypoints_targ_3d[1, 2] = float('nan')  # one keypoint of one frame has no 3D annotation
before = model.net[0].weight.detach().clone()
loss = criterion(keypoints_targ_3d, model(features))
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", round(loss.item(), 4), "NaN entries in the first layer's grad:", int(model.net[0].weight.grad.isnan().sum()),
      "of", model.net[0].weight.numel(), "; weight finite after the step:", bool(model.net[0].weight.isfinite().all()))
