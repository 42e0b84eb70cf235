import torch
from loop import fit
from module import LitRegressor

loader = [(torch.randn(8, 7), torch.randn(8, 1)) for _ in range(3)]
fit(LitRegressor(), loader)
