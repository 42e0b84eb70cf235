import torch


def discounted(rewards, gamma=0.99):
    out, g = [], 0.0
    for r in reversed(rewards):
        g = r + gamma * g
        out.insert(0, g)
    ret = torch.tensor(out)
    return (ret - ret.mean()) / (ret.std() + 1e-8)


def update(optimizer, log_probs, rewards):
    returns = discounted(rewards)
    loss = -(torch.stack(log_probs) * returns).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
