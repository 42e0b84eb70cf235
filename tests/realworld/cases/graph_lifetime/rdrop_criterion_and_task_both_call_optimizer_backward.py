"""R-Drop summarization on fairseq: the R-Drop criterion already calls optimizer.backward(loss) inside forward_reg, and the task's train_step then backpropagates the returned loss a second time through the same, already freed graph.

source: https://github.com/dropreg/R-Drop/issues/8
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FairseqOptimizer:
    def __init__(self, params, lr):
        self.optimizer = torch.optim.Adam(params, lr=lr)

    def backward(self, loss):
        loss.backward()

    def step(self):
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()


class RegLabelSmoothedCrossEntropyCriterion:
    def __init__(self, eps=0.1):
        self.eps = eps

    def forward_reg(self, model, sample, optimizer, reg_alpha, ignore_grad):
        src, target = sample
        net_output = model(torch.cat([src, src], 0))
        lprobs = F.log_softmax(net_output, dim=-1)
        ce = F.nll_loss(lprobs, torch.cat([target, target], 0))
        p, q = lprobs.chunk(2, dim=0)
        kl = 0.5 * (F.kl_div(p, q, log_target=True, reduction='batchmean')
                    + F.kl_div(q, p, log_target=True, reduction='batchmean'))
        loss = ce + reg_alpha * kl
        if ignore_grad:
            loss *= 0
        with torch.autograd.profiler.record_function("backward"):
            optimizer.backward(loss)
        return loss, src.size(0), {'loss': loss.item()}


class RDropTranslationTask:
    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        model.train()
        loss, sample_size, logging_output = criterion.forward_reg(model, sample, optimizer, 0.7, ignore_grad)
        if ignore_grad:
            loss *= 0
        with torch.autograd.profiler.record_function("backward"):
            optimizer.backward(loss)  # ROOT
        return loss, sample_size, logging_output


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.ReLU(), nn.Linear(32, 10))
optimizer = FairseqOptimizer(model.parameters(), lr=1e-3)
task, criterion = RDropTranslationTask(), RegLabelSmoothedCrossEntropyCriterion()
for update_num in range(2):
    sample = (torch.randn(4, 16), torch.randint(0, 10, (4,)))
    optimizer.zero_grad()
    task.train_step(sample, model, criterion, optimizer, update_num)
    optimizer.step()
