"""CLIP_benchmark runs zero-shot classification on the model returned by the loader without calling model.eval(), so a model whose dropout is active by default scores a different, noisy accuracy.

source: https://github.com/LAION-AI/CLIP_benchmark/issues/73
kind: bug
symptom: silent
verified: two evaluations of the same (untrained) model on the same 256 images give top-1 accuracies 0.102 and 0.062 and logits that differ by 100 (max abs, logit scale 100); with model.eval() both give 0.055 and identical logits (difference 0.0)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvNextCLIP(nn.Module):
    def __init__(self, dim=32, embed_dim=16, vocab=20, drop=0.3):
        super().__init__()
        self.visual = nn.Sequential(nn.Linear(48, dim), nn.GELU(), nn.Dropout(drop), nn.Linear(dim, embed_dim))
        self.token_embedding = nn.Embedding(vocab, embed_dim)

    def encode_image(self, image):
        return self.visual(image)

    def encode_text(self, text):
        return self.token_embedding(text).mean(1)


def load_clip(model_name):
    torch.manual_seed(0)
    return ConvNextCLIP()


def zero_shot_classifier(model, classnames, templates):
    with torch.no_grad():
        zeroshot_weights = []
        for c in range(len(classnames)):
            texts = torch.tensor([[t, c] for t in range(len(templates))])
            class_embeddings = F.normalize(model.encode_text(texts), dim=-1).mean(0)
            zeroshot_weights.append(class_embeddings / class_embeddings.norm())
        return torch.stack(zeroshot_weights, dim=1)


def run_classification(model, classifier, dataloader):
    correct, n, all_logits = 0, 0, []
    with torch.no_grad():
        for images, target in dataloader:
            image_features = F.normalize(model.encode_image(images), dim=-1)
            logits = 100. * image_features @ classifier
            correct += (logits.argmax(-1) == target).sum().item()
            n += len(target)
            all_logits.append(logits)
    return correct / n, torch.cat(all_logits)


model = load_clip("convnext_base")  # ROOT
classnames, templates = [f"class {i}" for i in range(10)], ["a photo of a {}.", "a {}."]
classifier = zero_shot_classifier(model, classnames, templates)
torch.manual_seed(1)
proto = torch.randn(10, 48)
labels = torch.randint(0, 10, (256,))
images = proto[labels] + 0.5 * torch.randn(256, 48)
dataloader = [(images[i:i + 64], labels[i:i + 64]) for i in range(0, 256, 64)]
acc1, logits1 = run_classification(model, classifier, dataloader)
acc2, logits2 = run_classification(model, classifier, dataloader)
print(f"top1 {acc1:.3f} {acc2:.3f}, logits differ by {(logits1 - logits2).abs().max().item():.3f}")
