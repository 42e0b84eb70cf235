"""SpatioTemporalSegmentation: zero_grad once per iteration, backward in each of iter_size sub-iterations, then one step.

source: https://github.com/chrischoy/SpatioTemporalSegmentation/issues/46
kind: lookalike
verified: the accumulated gradient equals the gradient of the mean loss over the iter_size sub-batches
"""
import torch
import torch.nn as nn


class Config:
    iter_size = 3
    max_iter = 1


def train(model, data_loader, config):
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    data_iter = iter(data_loader)
    for iteration in range(len(data_loader) // config.iter_size):
        optimizer.zero_grad()
        batch_loss = 0
        for sub_iter in range(config.iter_size):
            input, target = next(data_iter)
            soutput = model(input)
            loss = criterion(soutput, target.long())
            loss /= config.iter_size
            batch_loss += loss.item()
            loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        if iteration + 1 >= config.max_iter:
            return grads


torch.manual_seed(0)
model = nn.Linear(4, 3)
loader = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(6)]
reference = nn.Linear(4, 3)
reference.load_state_dict(model.state_dict())
grads = train(model, loader[:3], Config)
full_loss = sum(nn.functional.cross_entropy(reference(x), y) for x, y in loader[:3]) / 3
full_loss.backward()
print(all(torch.allclose(g, p.grad, atol=1e-6) for g, p in zip(grads, reference.parameters())))
