import torch


class LogReg:
    def __init__(self, d):
        self.w = torch.randn(d, 1, requires_grad=True) * 0.01  # ROOT
        self.b = torch.zeros(1, requires_grad=True)

    def __call__(self, x):
        return torch.sigmoid(x @ self.w + self.b)


clf = LogReg(5)
opt = torch.optim.SGD([clf.w, clf.b], lr=0.1)
x, y = torch.randn(10, 5), torch.randint(0, 2, (10, 1)).float()
for _ in range(3):
    loss = torch.nn.functional.binary_cross_entropy(clf(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
