import torch
from instantiate import instantiate

CONFIG = {
    "model": {"_target_": "torch.nn.Linear", "in_features": 6, "out_features": 2},
    "optim": {"_target_": "torch.optim.AdamW", "lr": 1e-2},
    "ema": False,
}


class Experiment:
    def __init__(self, cfg):
        self.cfg = cfg
        self.model = instantiate(cfg["model"])
        self.optimizer = instantiate(cfg["optim"], params=self.model.parameters())

    def setup(self, stage):
        if stage == "fit":
            self.model = instantiate(self.cfg["model"])  # ROOT
            torch.nn.init.zeros_(self.model.bias)
