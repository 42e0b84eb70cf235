import torch.nn.functional as F


def train_step(state, batch):
    x, y = batch
    loss = F.cross_entropy(state.model(x), y)
    state.optimizer.zero_grad()
    loss.backward()
    state.optimizer.step()
    state.step += 1
    state.history.append(loss.item())
    return state
