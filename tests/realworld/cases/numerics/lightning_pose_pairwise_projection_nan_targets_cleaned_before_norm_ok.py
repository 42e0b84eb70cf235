"""lightning-pose's PairwiseProjectionsLoss after PR 358 replaces NaN targets and the matching predictions by detached zeros with torch.where before the norm and marks those losses NaN afterwards, so masked_select drops them and no NaN reaches the network's gradient.

source: https://github.com/paninski-lab/lightning-pose/pull/358
kind: lookalike
"""
import torch


class PairwiseProjectionsLoss(torch.nn.Module):  # lightning-pose's Loss base reduced to weight and mean reduction
    def __init__(self, weight=1.0):
        super().__init__()
        self.weight = weight

    def remove_nans(self, loss):
        mask = ~torch.isnan(loss)
        valid_losses = torch.masked_select(loss, mask)
        if valid_losses.numel() == 0:
            dummy_loss = torch.where(mask, loss, torch.zeros_like(loss))
            return dummy_loss.sum()
        else:
            return valid_losses

    def compute_loss(self, targets, predictions):
        nan_targets = torch.isnan(targets).any(dim=-1)
        nan_predictions = torch.isnan(predictions).any(dim=-1)
        combined_nan_mask = nan_targets.unsqueeze(1) | nan_predictions
        clean_targets = torch.where(nan_targets.unsqueeze(-1), torch.zeros_like(targets).detach(), targets)
        clean_predictions = torch.where(combined_nan_mask.unsqueeze(-1), torch.zeros_like(predictions).detach(), predictions)
        loss = torch.linalg.norm(clean_targets.unsqueeze(1) - clean_predictions, ord=2, dim=-1)
        loss = torch.where(combined_nan_mask, torch.tensor(float('nan'), device=loss.device, dtype=loss.dtype), loss)
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
