import torch.nn.functional as F


def train_tbptt(model, opt, chunks):
    h = model.init_hidden(chunks[0][0].shape[0])
    for x, y in chunks:
        logits, h = model(x, h)  # ROOT
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
