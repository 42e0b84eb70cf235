"""easyfsl after "Fix gradient issues in finetuning methods": Finetune freezes its backbone in `__init__` (the prototypes are fine-tuned as leaves) and runs the prototype fine-tuning loop inside `with torch.enable_grad():`, so it builds a graph and steps Adam even though `evaluate` calls the model under `torch.no_grad()`; the returned query logits are detached.

source: https://github.com/sicara/easy-few-shot-learning/commit/570839f92e720ef30b7794c6ca7d7d4da6a86488
kind: lookalike
"""
import torch
from torch import nn, Tensor

torch.manual_seed(0)


def compute_prototypes(support_features: Tensor, support_labels: Tensor) -> Tensor:
    n_way = len(torch.unique(support_labels))
    return torch.cat([support_features[torch.nonzero(support_labels == label)].mean(0) for label in range(n_way)])


class FewShotClassifier(nn.Module):
    def __init__(self, backbone: nn.Module, use_softmax: bool = False):
        super().__init__()
        self.backbone = backbone
        self.use_softmax = use_softmax
        self.prototypes = None
        self.support_features = None
        self.support_labels = None

    def store_features_labels_and_prototypes(self, support_images, support_labels):
        self.support_labels = support_labels
        self.support_features = self.backbone(support_images)
        self.prototypes = compute_prototypes(self.support_features, support_labels)

    def get_logits_from_cosine_distances_to_prototypes(self, samples):
        return (nn.functional.normalize(samples, dim=1) @ nn.functional.normalize(self.prototypes, dim=1).T)

    def softmax_if_specified(self, output):
        return output.softmax(-1) if self.use_softmax else output


class Finetune(FewShotClassifier):
    """Fine-tune prototypes based on classification error on support images; classify queries by cosine distance."""

    def __init__(self, *args, fine_tuning_steps: int = 10, fine_tuning_lr: float = 1e-4, **kwargs):
        super().__init__(*args, **kwargs)

        # Since we fine-tune the prototypes we need to make them leaf variables
        # i.e. we need to freeze the backbone.
        self.backbone.requires_grad_(False)

        self.fine_tuning_steps = fine_tuning_steps
        self.fine_tuning_lr = fine_tuning_lr

    def process_support_set(self, support_images, support_labels):
        self.store_features_labels_and_prototypes(support_images, support_labels)

    def forward(self, query_images):
        query_features = self.backbone.forward(query_images)

        # Run adaptation
        with torch.enable_grad():
            self.prototypes.requires_grad_()
            optimizer = torch.optim.Adam([self.prototypes], lr=self.fine_tuning_lr)
            for _ in range(self.fine_tuning_steps):
                support_logits = self.get_logits_from_cosine_distances_to_prototypes(self.support_features)
                loss = nn.functional.cross_entropy(support_logits, self.support_labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        return self.softmax_if_specified(
            self.get_logits_from_cosine_distances_to_prototypes(query_features)
        ).detach()


def evaluate_on_one_task(model, support_images, support_labels, query_images, query_labels):
    model.process_support_set(support_images, support_labels)
    return (torch.max(model(query_images).detach().data, 1)[1] == query_labels).sum().item(), len(query_labels)


def evaluate(model, data_loader, device="cpu"):
    total_predictions = 0
    correct_predictions = 0
    # eval mode affects the behaviour of some layers (such as batch normalization or dropout)
    # no_grad() tells torch not to keep in memory the whole computational graph
    model.eval()
    with torch.no_grad():
        for support_images, support_labels, query_images, query_labels, _ in data_loader:
            correct, total = evaluate_on_one_task(model, support_images.to(device), support_labels.to(device),
                                                  query_images.to(device), query_labels.to(device))
            total_predictions += total
            correct_predictions += correct
    return correct_predictions / total_predictions


def task_sampler(n_tasks, n_way=3, n_shot=2, n_query=4):
    for _ in range(n_tasks):
        support_labels = torch.arange(n_way).repeat_interleave(n_shot)
        query_labels = torch.arange(n_way).repeat_interleave(n_query)
        centres = torch.randn(n_way, 3, 1, 1)
        support = centres[support_labels] + 0.5 * torch.randn(len(support_labels), 3, 8, 8)
        query = centres[query_labels] + 0.5 * torch.randn(len(query_labels), 3, 8, 8)
        yield support, support_labels, query, query_labels, list(range(n_way))


backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten())
model = Finetune(backbone, fine_tuning_steps=10, fine_tuning_lr=1e-2)
accuracy = evaluate(model, task_sampler(5))
print(f"Average accuracy : {100 * accuracy:.2f} %")
