from losses import charbonnier


def train_step(net, opt, batch):
    lr_img, hr_img = batch
    sr = net(lr_img)
    loss = charbonnier(sr, hr_img)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss)
