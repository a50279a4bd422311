"""torchtext's RoBERTa encoder with its classification head, small, as a
zoo model nobody here wrote: token and learned positional embeddings,
PyTorch's own TransformerEncoderLayer blocks (in train mode, so the
unfused path), a 3-class head on the first token, traced in train mode,
cross_entropy, SGD over 3 steps of 2 micro-batches. Dropout is 0, or 0.1
(torchtext's default) with --real-rates. Needs python3-torchtext
(scripts/install-deps.sh).

Debian 12's torchtext cannot load its C++ extension (its tokenizers and
vocabularies); the models do not use it, so it is stubbed before import.

Usage: /usr/bin/python3 torchtext_zoo.py MODEL OUT_DIR [--real-rates]
       /usr/bin/python3 torchtext_zoo.py --list
"""
import sys
import types

import torch

import common


class _Extension(types.ModuleType):
    """Stands in for torchtext._torchtext: each name is an empty class."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


sys.modules.setdefault("torchtext._extension",
                       types.ModuleType("torchtext._extension"))
sys.modules.setdefault("torchtext._torchtext",
                       _Extension("torchtext._torchtext"))
from torchtext.models import RobertaClassificationHead  # noqa: E402
from torchtext.models import RobertaEncoderConf, RobertaModel  # noqa: E402

CLASSES, VOCAB, SEQ = 3, 100, 8


def tt_roberta(real):
    p = 0.1 if real else 0.0
    conf = RobertaEncoderConf(vocab_size=VOCAB, embedding_dim=32,
                              ffn_dimension=64, num_attention_heads=2,
                              num_encoder_layers=2, max_seq_len=32,
                              dropout=p)
    head = RobertaClassificationHead(num_classes=CLASSES, input_dim=32,
                                     dropout=p)
    return RobertaModel(conf, head)


MODELS = {f.__name__: f for f in (tt_roberta,)}


def build(name, real):
    common.seed()
    model = MODELS[name](real)
    g = common.data_gen()
    # Token ids from 2 up: 1 is the padding index, 0 the start token.
    x = torch.randint(2, VOCAB, (common.ZOO_ROWS, SEQ), generator=g)
    y = torch.randint(0, CLASSES, (common.ZOO_ROWS,), generator=g)
    return model, (x[:common.ZOO_MB],), (x,), y, "cross_entropy"


if __name__ == "__main__":
    common.zoo_main(MODELS, build, __doc__)
