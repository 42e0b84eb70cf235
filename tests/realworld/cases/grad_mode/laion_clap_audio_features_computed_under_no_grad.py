"""LAION-CLAP's get_audio_embedding_from_data(x, use_tensor=True) promises to keep the gradient of the waveform for classifier guidance, but the get_audio_features helper it calls computes the mel features inside `with torch.no_grad():`, so the embedding no longer depends on the waveform and torch.autograd.grad(score, wav) fails; the merged PR makes the no_grad conditional on the waveform requiring grad.

source: https://github.com/LAION-AI/CLAP/pull/92
kind: bug
symptom: crash
verified: RuntimeError: The differentiated Tensor at index 0 appears to not have been used in the graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

AUDIO_CFG = {"sample_rate": 4800, "window_size": 64, "hop_size": 32, "mel_bins": 16, "fmin": 50, "fmax": 2000}


def get_mel(audio_data, audio_cfg):
    # mel shape: (T, n_mels); a fixed filterbank over framed power spectra
    frames = audio_data.unfold(0, audio_cfg["window_size"], audio_cfg["hop_size"])
    spec = torch.fft.rfft(frames * torch.hann_window(audio_cfg["window_size"]), dim=-1).abs() ** 2
    fbank = torch.linspace(0, 1, spec.shape[-1] * audio_cfg["mel_bins"]).reshape(spec.shape[-1], -1)
    return torch.log10(spec @ fbank + 1e-10)


def get_audio_features(sample, audio_data, max_len, data_truncating, data_filling, audio_cfg):
    """Calculate and add audio features to sample (a dict)."""
    with torch.no_grad():  # ROOT
        if len(audio_data) > max_len:
            audio_data = audio_data[:max_len]
            longer = torch.tensor([True])
        else:
            if data_filling == "repeatpad":
                n_repeat = int(max_len / len(audio_data))
                audio_data = audio_data.repeat(n_repeat)
                audio_data = F.pad(audio_data, (0, max_len - len(audio_data)), mode="constant", value=0)
            longer = torch.tensor([False])
        if data_truncating == "fusion":
            mel = get_mel(audio_data, audio_cfg)
            sample["mel_fusion"] = torch.stack([mel, mel, mel, mel], dim=0)
    sample["longer"] = longer
    sample["waveform"] = audio_data
    return sample


class CLAPAudioTower(nn.Module):
    def __init__(self, n_mels=16, embed_dim=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_mels, 64), nn.ReLU(), nn.Linear(64, embed_dim))

    def get_audio_embedding(self, data):
        mel = torch.stack([d["mel_fusion"] for d in data])  # (B, 4, T, n_mels)
        emb = self.encoder(mel).mean(dim=(1, 2))
        return F.normalize(emb, dim=-1)


class CLAP_Module(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = CLAPAudioTower()
        self.model_cfg = {"audio_cfg": AUDIO_CFG}

    def get_audio_embedding_from_data(self, x, use_tensor=False):
        self.model.eval()
        audio_input = []
        for audio_waveform in x:
            temp_dict = {}
            temp_dict = get_audio_features(temp_dict, audio_waveform, 4800, data_truncating="fusion",
                                           data_filling="repeatpad", audio_cfg=self.model_cfg["audio_cfg"])
            audio_input.append(temp_dict)
        audio_embed = self.model.get_audio_embedding(audio_input)
        if not use_tensor:
            audio_embed = audio_embed.detach().cpu().numpy()
        return audio_embed


def guidance_gradient(clap, wav, text_embed):
    """Classifier guidance: the direction that raises the audio-text similarity."""
    audio_embed = clap.get_audio_embedding_from_data(wav, use_tensor=True)
    score = (audio_embed * text_embed).sum()
    return torch.autograd.grad(score, wav)[0]  # SYMPTOM


torch.manual_seed(0)
clap = CLAP_Module()
text_embed = F.normalize(torch.randn(1, 32), dim=-1)
wav = (0.1 * torch.randn(2, 4800)).requires_grad_()
for step in range(3):
    g = guidance_gradient(clap, wav, text_embed)
    with torch.no_grad():
        wav += 0.05 * g / (g.norm() + 1e-8)
print("guided waveform norm", wav.norm().item())
