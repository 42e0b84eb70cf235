"""torch.log1p(a)[a > -1].sum(): the mask selects only valid entries after log1p has already been evaluated at -1, and the excluded entry's gradient is 0 * inf = NaN.

source: https://github.com/pytorch/pytorch/issues/152088
kind: bug
symptom: silent
verified: a.grad is tensor([nan, 0.6667, 0.5000]); the masked-out entry gets NaN instead of 0
"""
import torch


def test_bug():
    a = torch.tensor([-1.0, 0.5, 1.0], requires_grad=True)
    l = torch.log1p(a)[a > -1].sum()  # ROOT
    l.backward()
    print(a.grad)
    return a


if __name__ == "__main__":
    a = test_bug()
