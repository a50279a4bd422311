"""torchaudio's own architectures, in small configurations, as zoo models:
nobody here wrote them. DeepSpeech (fully connected layers with clipped
ReLU, then a bidirectional ReLU RNN, over spectrogram frames) and Conformer
(convolution-augmented transformer blocks), each averaged over time into a
10-class head, traced in train mode, cross_entropy, SGD over 3 steps of 2
micro-batches. Dropout is 0, or with --real-rates torchaudio's default for
the model (0.1). (Wav2Letter has 23 million parameters at any input size:
its matrix took two minutes.) Needs python3-torchaudio
(scripts/install-deps.sh).

Usage: /usr/bin/python3 torchaudio_zoo.py MODEL OUT_DIR [--real-rates]
       /usr/bin/python3 torchaudio_zoo.py --list
"""
import torch
import torch.nn as nn
import torchaudio.models as ta

import common

CLASSES = 10


class Classify(nn.Module):
    """A sequence model's features averaged over time, then a linear head."""

    def __init__(self, body, width, time_dim=1):
        super().__init__()
        self.body = body
        self.head = nn.Linear(width, CLASSES)
        self.time_dim = time_dim

    def forward(self, x):
        return self.head(self.features(x).mean(dim=self.time_dim))

    def features(self, x):
        return self.body(x)


class ConformerClassify(Classify):
    def features(self, x):
        lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.long)
        return self.body(x, lengths)[0]


def ta_deepspeech(real):
    body = ta.DeepSpeech(n_feature=16, n_hidden=32, n_class=16,
                         dropout=0.1 if real else 0.0)
    return Classify(body, 16), (1, 20, 16)


def ta_conformer(real):
    body = ta.Conformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2,
                        depthwise_conv_kernel_size=3,
                        dropout=0.1 if real else 0.0)
    return ConformerClassify(body, 16), (20, 16)


MODELS = {f.__name__: f for f in (ta_deepspeech, ta_conformer)}


def build(name, real):
    common.seed()
    model, row = MODELS[name](real)
    g = common.data_gen()
    x = torch.randn(common.ZOO_ROWS, *row, generator=g)
    y = torch.randint(0, CLASSES, (common.ZOO_ROWS,), generator=g)
    return model, (x[:common.ZOO_MB],), (x,), y, "cross_entropy"


if __name__ == "__main__":
    common.zoo_main(MODELS, build, __doc__)
