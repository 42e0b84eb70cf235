def fit(module, loader, epochs=1):
    opt = module.configure_optimizers()
    module.train()
    for _ in range(epochs):
        for i, batch in enumerate(loader):
            out = module.training_step(batch, i)
            opt.zero_grad()
            out["loss"].backward()
            opt.step()
