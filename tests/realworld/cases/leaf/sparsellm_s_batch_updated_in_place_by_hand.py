"""SparseLLM: the hand-written gradient step on the auxiliary variable s_batch is an in-place update of a leaf.

source: https://github.com/BaiTheBest/SparseLLM/issues/13
kind: bug
symptom: crash
verified: a leaf Variable that requires grad is being used in an in-place operation
"""
import torch
import torch.nn.functional as F


def update_s(s, W, target, s_learning_rate=0.1, s_steps=3, chunk_size=8):
    for start in range(0, s.shape[1], chunk_size):
        chunk = slice(start, start + chunk_size)
        s_batch = s[:, chunk].float().requires_grad_(True)
        for _ in range(s_steps):
            loss_s = F.mse_loss(W @ F.relu(s_batch), target[:, chunk])
            loss_s.backward()
            s_batch -= s_learning_rate * s_batch.grad  # ROOT
            s_batch.grad.zero_()
        s[:, chunk] = s_batch.detach().to(dtype=torch.float16)
    return s


torch.manual_seed(0)
s = torch.randn(16, 32, dtype=torch.float16)
W = torch.randn(12, 16) / 4
target = torch.randn(12, 32)
s = update_s(s, W, target)
