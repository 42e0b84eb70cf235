import torch
import torch.nn.functional as F


class KeyQueue:
    def __init__(self, dim, size):
        self.keys = F.normalize(torch.randn(size, dim), dim=1)
        self.ptr = 0

    def enqueue(self, k):
        n = k.size(0)
        self.keys[self.ptr:self.ptr + n] = k.detach()
        self.ptr = (self.ptr + n) % self.keys.size(0)
