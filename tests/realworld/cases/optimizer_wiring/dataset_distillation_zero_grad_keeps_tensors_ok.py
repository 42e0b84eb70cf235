"""The same dataset-distillation trainer with self.optimizer.zero_grad(set_to_none=False): the preallocated .grad tensors are zeroed in place (the torch 1.x behaviour the code was written for), so d.grad.add_(g) accumulates the hypergradients.

source: https://github.com/ssnl/dataset-distillation/issues/61
kind: lookalike
"""
import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, num_classes=3, distill_steps=2, lr=0.02):
        self.data = [torch.randn(num_classes, 8, requires_grad=True) for _ in range(distill_steps)]
        self.labels = [torch.arange(num_classes) for _ in range(distill_steps)]
        self.raw_distill_lrs = torch.full((distill_steps,), lr).expm1_().log_().requires_grad_()
        self.params = self.data + [self.raw_distill_lrs]
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.optimizer = torch.optim.Adam(self.params, lr=0.01)

    def get_steps(self):
        lrs = F.softplus(self.raw_distill_lrs).unbind()
        return list(zip(self.data, self.labels, lrs))

    def forward(self, w, rdata, rlabel, steps):
        datas, gdatas, lrs, glrs = [], [], [], []
        for data, label, lr in steps:
            loss = F.cross_entropy(data @ w, label)
            gw, = torch.autograd.grad(loss, w, create_graph=True)
            w = w - lr * gw
        final_loss = F.cross_entropy(rdata @ w, rlabel)
        grads = torch.autograd.grad(final_loss, [d for d, _, _ in steps] + [lr for _, _, lr in steps])
        n = len(steps)
        datas, gdatas = [d for d, _, _ in steps], list(grads[:n])
        lrs, glrs = [lr for _, _, lr in steps], list(grads[n:])
        return final_loss, (datas, gdatas, lrs, glrs)

    def accumulate_grad(self, grad_infos):
        bwd_out, bwd_grad = [], []
        for datas, gdatas, lrs, glrs in grad_infos:
            bwd_out += list(lrs)
            bwd_grad += list(glrs)
            for d, g in zip(datas, gdatas):
                d.grad.add_(g)
        if len(bwd_out) > 0:
            torch.autograd.backward(bwd_out, bwd_grad)

    def train(self, iters=3):
        for it in range(iters):
            rdata, rlabel = torch.randn(16, 8), torch.randint(0, 3, (16,))
            self.optimizer.zero_grad(set_to_none=False)
            w = torch.randn(8, 3, requires_grad=True)
            loss, grad_info = self.forward(w, rdata, rlabel, self.get_steps())
            self.accumulate_grad([grad_info])
            self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
print(Trainer().train())
