"""learning-to-reweight-examples: the optimizer takes model.parameters() of a MetaModule whose layers keep their weights as buffers (only model.params() yields them).

source: https://github.com/danieltan07/learning-to-reweight-examples/issues/6
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


def to_var(x, requires_grad=True):
    return x.clone().detach().requires_grad_(requires_grad)


class MetaModule(nn.Module):
    def params(self):
        for name, param in self.named_params(self):
            yield param

    def named_leaves(self):
        return []

    def named_params(self, curr_module=None, memo=None, prefix=''):
        if memo is None:
            memo = set()
        if hasattr(curr_module, 'named_leaves'):
            for name, p in curr_module.named_leaves():
                if p is not None and p not in memo:
                    memo.add(p)
                    yield prefix + ('.' if prefix else '') + name, p
        for mname, module in curr_module.named_children():
            submodule_prefix = prefix + ('.' if prefix else '') + mname
            for name, p in self.named_params(module, memo, submodule_prefix):
                yield name, p


class MetaLinear(MetaModule):
    def __init__(self, *args, **kwargs):
        super().__init__()
        ignore = nn.Linear(*args, **kwargs)
        self.register_buffer('weight', to_var(ignore.weight.data, requires_grad=True))
        self.register_buffer('bias', to_var(ignore.bias.data, requires_grad=True))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def named_leaves(self):
        return [('weight', self.weight), ('bias', self.bias)]


class LeNet(MetaModule):
    def __init__(self, n_out):
        super(LeNet, self).__init__()
        self.fc1 = MetaLinear(16, 32)
        self.fc2 = MetaLinear(32, n_out)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x))).squeeze()


torch.manual_seed(0)
model = LeNet(n_out=1)
optimizer = optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)  # ROOT
x, y = torch.randn(8, 16), torch.randint(0, 2, (8,)).float()
loss = F.binary_cross_entropy_with_logits(model(x), y)
optimizer.zero_grad()
loss.backward()
optimizer.step()
