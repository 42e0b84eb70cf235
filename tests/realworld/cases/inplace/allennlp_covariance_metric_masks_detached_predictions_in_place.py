"""AllenNLP's Covariance metric masks its inputs with `predictions *= mask` and `gold_labels *= mask` after `unwrap_to_tensors`, whose `x.detach().cpu()` is the same storage and version counter on CPU: a model that calls the metric on its predictions after computing the loss has the tensors its loss saved for backward modified, and loss.backward() fails.

source: https://github.com/allenai/allennlp/pull/1691
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
from typing import Optional

import torch


class Metric:
    @staticmethod
    def unwrap_to_tensors(*tensors: torch.Tensor):
        """Detach the tensors and move them to the CPU (a gradient-tracking Tensor would keep the graph alive)."""
        return (x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in tensors)


class Covariance(Metric):
    def __init__(self) -> None:
        self.reset()

    def __call__(self, predictions: torch.Tensor, gold_labels: torch.Tensor, mask: Optional[torch.Tensor] = None):
        predictions, gold_labels, mask = self.unwrap_to_tensors(predictions, gold_labels, mask)
        predictions = predictions.view(-1)
        gold_labels = gold_labels.view(-1)

        if mask is not None:
            mask = mask.view(-1)
            predictions *= mask  # ROOT
            gold_labels *= mask
            num_batch_items = torch.sum(mask).item()
        else:
            num_batch_items = gold_labels.numel()

        previous_count = self._total_count
        updated_count = self._total_count + num_batch_items

        batch_mean_prediction = torch.sum(predictions) / num_batch_items
        delta_mean_prediction = ((batch_mean_prediction - self._total_prediction_mean) * num_batch_items) / updated_count
        previous_total_prediction_mean = self._total_prediction_mean
        self._total_prediction_mean += delta_mean_prediction.item()

        batch_mean_label = torch.sum(gold_labels) / num_batch_items
        delta_mean_label = ((batch_mean_label - self._total_label_mean) * num_batch_items) / updated_count
        previous_total_label_mean = self._total_label_mean
        self._total_label_mean += delta_mean_label.item()

        batch_coresiduals = (predictions - batch_mean_prediction) * (gold_labels - batch_mean_label)
        if mask is not None:
            batch_co_moment = torch.sum(batch_coresiduals * mask)
        else:
            batch_co_moment = torch.sum(batch_coresiduals)
        delta_co_moment = (batch_co_moment + (previous_total_prediction_mean - batch_mean_prediction)
                           * (previous_total_label_mean - batch_mean_label)
                           * (previous_count * num_batch_items / updated_count))
        self._total_co_moment += delta_co_moment.item()
        self._total_count = updated_count

    def get_metric(self, reset: bool = False):
        covariance = self._total_co_moment / (self._total_count - 1)
        if reset:
            self.reset()
        return covariance

    def reset(self):
        self._total_prediction_mean = 0.0
        self._total_label_mean = 0.0
        self._total_co_moment = 0.0
        self._total_count = 0.0


class SelectiveRegressor(torch.nn.Module):  # a token-level regressor scored on the tokens the mask selects
    def __init__(self, input_dim=12):
        super().__init__()
        self.encoder = torch.nn.GRU(input_dim, 16, batch_first=True)
        self.regressor = torch.nn.Linear(16, 1)
        self.covariance = Covariance()

    def forward(self, tokens, mask, label=None):
        encoded, _ = self.encoder(tokens)
        predictions = self.regressor(encoded).squeeze(-1)
        output_dict = {"predictions": predictions}
        if label is not None:
            loss = torch.nn.functional.mse_loss(predictions, label, reduction="none")
            output_dict["loss"] = (loss * mask).sum() / mask.sum()
            self.covariance(predictions, label, mask)
        return output_dict


torch.manual_seed(0)
model = SelectiveRegressor()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for batch in range(3):
    tokens, label = torch.randn(4, 7, 12), torch.randn(4, 7)
    mask = (torch.rand(4, 7) > 0.3).float()
    optimizer.zero_grad()
    output_dict = model(tokens, mask, label)
    loss = output_dict["loss"]
    loss.backward()  # SYMPTOM
    optimizer.step()
    print(batch, loss.item(), model.covariance.get_metric())
