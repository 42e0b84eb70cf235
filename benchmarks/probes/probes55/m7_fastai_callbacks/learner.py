class Callback:
    order = 0
    learn = None

    def __call__(self, event):
        fn = getattr(self, event, None)
        if fn is not None:
            fn()


class Learner:
    def __init__(self, model, data, loss_func, opt_func, lr, cbs=()):
        self.model, self.data, self.loss_func, self.lr = model, data, loss_func, lr
        self.opt = opt_func(model.parameters(), lr=lr)
        self.cbs = sorted(cbs, key=lambda c: c.order)
        for cb in self.cbs:
            cb.learn = self

    def callback(self, event):
        for cb in self.cbs:
            cb(event)

    def one_batch(self, xb, yb):
        self.pred = self.model(xb)
        self.loss = self.loss_func(self.pred, yb)
        self.callback("after_loss")
        self.loss.backward()
        self.callback("after_backward")
        self.opt.step()
        self.callback("after_step")

    def fit(self, n_epoch):
        for epoch in range(n_epoch):
            for xb, yb in self.data:
                self.one_batch(xb, yb)
