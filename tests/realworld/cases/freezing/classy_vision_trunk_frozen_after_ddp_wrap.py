"""ClassyVision's FineTuningTask.prepare freezes the trunk (`param.requires_grad = False` on every parameter outside the heads) after ClassificationTask.prepare has already wrapped the model in DistributedDataParallel: DDP's reducer still expects a gradient for every trunk parameter, the first backward never finishes its reduction, and the second training step fails in the forward.

source: https://github.com/facebookresearch/ClassyVision/pull/398
kind: bug
launch: torchrun --nproc-per-node=2
symptom: crash
verified: Expected to have finished reduction in the prior iteration before starting a new one
"""
import torch
import torch.distributed as dist
from torch import nn


def is_distributed_training_run():
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class ClassyModel(nn.Module):  # a small trunk and one fully connected head, as a ResNet with a "default_head"
    def __init__(self, num_classes=5):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.heads = nn.ModuleDict({"block3-2": nn.ModuleDict({"default_head": nn.Linear(8, num_classes)})})

    def get_heads(self):
        return self.heads

    def forward(self, x):
        return self.heads["block3-2"]["default_head"](self.trunk(x))


class ClassificationTask:
    def __init__(self, model):
        self.base_model, self.distributed_model = model, None
        self.loss = nn.CrossEntropyLoss()

    @property
    def model(self):
        return self.distributed_model if self.distributed_model is not None else self.base_model

    def prepare(self):
        self.base_model.cpu()
        # initialize the pytorch optimizer now since the model has been moved to the appropriate device
        self.optimizer = torch.optim.SGD(self.base_model.parameters(), lr=0.1, momentum=0.9)

        if is_distributed_training_run():
            self.init_distributed_data_parallel_model()

    def init_distributed_data_parallel_model(self):
        assert self.distributed_model is None, "init_ddp_non_elastic must only be called once"
        self.distributed_model = nn.parallel.DistributedDataParallel(self.base_model)

    def train_step(self, sample):
        with torch.enable_grad():
            output = self.model(sample["input"])  # SYMPTOM
            local_loss = self.loss(output, sample["target"])
        self.optimizer.zero_grad()
        local_loss.backward()
        self.optimizer.step()
        return local_loss.detach()


class FineTuningTask(ClassificationTask):
    def __init__(self, model, freeze_trunk=True):
        super().__init__(model)
        self.freeze_trunk = freeze_trunk

    def prepare(self):
        super().prepare()
        # (the pretrained checkpoint's trunk would be loaded here)
        if self.freeze_trunk:
            # do not track gradients for all the parameters in the model except
            # for the parameters in the heads
            for param in self.base_model.parameters():
                param.requires_grad = False  # ROOT
            for heads in self.base_model.get_heads().values():
                for h in heads.values():
                    for param in h.parameters():
                        param.requires_grad = True


def run():
    dist.init_process_group("gloo")  # rank and world size from the launcher's environment
    rank = dist.get_rank()
    torch.manual_seed(0)
    task = FineTuningTask(ClassyModel(), freeze_trunk=True)
    task.prepare()
    g = torch.Generator().manual_seed(rank)
    for step in range(3):
        sample = {"input": torch.randn(4, 3, 8, 8, generator=g), "target": torch.randint(0, 5, (4,), generator=g)}
        loss = task.train_step(sample)
        if rank == 0:
            print("step", step, "loss", loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    run()
