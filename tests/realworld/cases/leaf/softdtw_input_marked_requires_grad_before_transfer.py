"""The pytorch-softdtw-cuda example creates the sequence `x` with `requires_grad=True` and only then transfers it (`x = x.to(device)`), so the name `x` now holds the transferred copy, a non-leaf tensor; the soft-DTW loss backpropagates into the original leaf, which nothing references any more, and `x.grad` stays None (a UserWarning about reading `.grad` of a non-leaf is all that is printed). Here the transfer to CUDA is replaced by a transfer to the float64 compute dtype, which also returns a new tensor.

source: https://github.com/Maghoumi/pytorch-softdtw-cuda/issues/25
kind: bug
symptom: silent
verified: after `loss.mean().backward()` x.grad is None (x.is_leaf: False; grad is None: True) although the loss is 2.6143; the look-alike (transfer first, then `requires_grad_()`) gets a gradient for x (grad is None: False, norm: 1.6339)
"""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)

DEVICE, DTYPE = torch.device("cpu"), torch.float64


class SoftDTW(torch.nn.Module):
    """Soft-DTW discrepancy (Cuturi & Blondel), dynamic programme over the pairwise cost matrix."""

    def __init__(self, gamma=0.1):
        super().__init__()
        self.gamma = gamma

    def softmin(self, a, b, c):
        stacked = torch.stack([a, b, c], dim=-1)
        return -self.gamma * torch.logsumexp(-stacked / self.gamma, dim=-1)

    def forward(self, x, y):
        cost = torch.cdist(x, y) ** 2
        batch, n, m = cost.shape
        inf = torch.full((batch,), float("inf"), dtype=cost.dtype)
        r = [[inf] * (m + 1) for _ in range(n + 1)]
        r[0][0] = torch.zeros(batch, dtype=cost.dtype)
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                r[i][j] = cost[:, i - 1, j - 1] + self.softmin(r[i - 1][j - 1], r[i - 1][j], r[i][j - 1])
        return r[n][m]


def main():
    batch_size, len_x, len_y, dims = 4, 7, 6, 3
    x = torch.rand((batch_size, len_x, dims), requires_grad=True)
    y = torch.rand((batch_size, len_y, dims))
    x = x.to(device=DEVICE, dtype=DTYPE)  # ROOT
    y = y.to(device=DEVICE, dtype=DTYPE)

    sdtw = SoftDTW(gamma=0.1)
    loss = sdtw(x, y)
    loss.mean().backward()
    print("loss:", round(loss.mean().item(), 4), "x.is_leaf:", x.is_leaf)
    grad = x.grad
    print("grad is None:", grad is None, "norm:", None if grad is None else round(grad.norm().item(), 4))


if __name__ == "__main__":
    main()
