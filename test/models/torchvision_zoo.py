"""torchvision's own architectures, in small configurations, as zoo models:
nobody here wrote them. Each is built from torchvision's classes with its
dropout and stochastic depth at zero (so that training is deterministic and
PyTorch's numbers can be matched), or with --real-rates at the rates of
torchvision's own builders (mobilenet_v2, efficientnet_b0, squeezenet1_1,
convnext_tiny, swin_t, ...), traced in train mode (BatchNorm uses batch
statistics), 10 classes, cross_entropy, SGD over 3 steps of 2
micro-batches. Needs python3-torchvision (scripts/install-deps.sh).

Usage: /usr/bin/python3 torchvision_zoo.py MODEL OUT_DIR [--real-rates]
       /usr/bin/python3 torchvision_zoo.py --list
"""
import torch
from torchvision import models as tv
from torchvision.models import convnext, efficientnet, mobilenetv3, regnet
from torchvision.models import resnet, shufflenetv2

import common

CLASSES = 10


def tv_resnet(real):
    return resnet.ResNet(resnet.BasicBlock, [1, 1, 1, 1], num_classes=CLASSES), 32


def tv_resnet_bottleneck(real):
    return resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], num_classes=CLASSES,
                         width_per_group=16), 32


def tv_mobilenet_v2(real):
    return tv.MobileNetV2(num_classes=CLASSES, width_mult=0.25,
                          dropout=0.2 if real else 0.0), 32


def tv_mobilenet_v3(real):
    setting, last = mobilenetv3._mobilenet_v3_conf("mobilenet_v3_small",
                                                   width_mult=0.25)
    return mobilenetv3.MobileNetV3(setting, last, num_classes=CLASSES,
                                   dropout=0.2 if real else 0.0), 32


def tv_efficientnet(real):
    setting, last = efficientnet._efficientnet_conf(
        "efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    p = 0.2 if real else 0.0
    return efficientnet.EfficientNet(setting, dropout=p,
                                     stochastic_depth_prob=p,
                                     num_classes=CLASSES,
                                     last_channel=last), 32


def tv_densenet(real):
    return tv.DenseNet(growth_rate=8, block_config=(2, 2),
                       num_init_features=16, bn_size=2,
                       num_classes=CLASSES), 32


def tv_regnet(real):
    params = regnet.BlockParams.from_init_params(
        depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8)
    return regnet.RegNet(params, num_classes=CLASSES, stem_width=8), 32


def tv_shufflenet(real):
    return shufflenetv2.ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 128],
                                     num_classes=CLASSES), 32


def tv_squeezenet(real):
    return tv.SqueezeNet("1_1", num_classes=CLASSES,
                         dropout=0.5 if real else 0.0), 32


def tv_vit(real):
    return tv.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                num_heads=2, hidden_dim=32, mlp_dim=64,
                                num_classes=CLASSES), 32


def tv_convnext(real):
    setting = [convnext.CNBlockConfig(16, 32, 1),
               convnext.CNBlockConfig(32, None, 1)]
    return convnext.ConvNeXt(setting,
                             stochastic_depth_prob=0.1 if real else 0.0,
                             num_classes=CLASSES), 32


def tv_swin(real):
    return tv.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[1, 1],
                              num_heads=[2, 2], window_size=[4, 4],
                              stochastic_depth_prob=0.2 if real else 0.0,
                              num_classes=CLASSES), 32


MODELS = {f.__name__: f for f in (
    tv_resnet, tv_resnet_bottleneck, tv_mobilenet_v2, tv_mobilenet_v3,
    tv_efficientnet, tv_densenet, tv_regnet, tv_shufflenet, tv_squeezenet,
    tv_vit, tv_convnext, tv_swin)}


def build(name, real):
    common.seed()
    model, size = MODELS[name](real)
    g = common.data_gen()
    x = torch.randn(common.ZOO_ROWS, 3, size, size, generator=g)
    y = torch.randint(0, CLASSES, (common.ZOO_ROWS,), generator=g)
    return model, (x[:common.ZOO_MB],), (x,), y, "cross_entropy"


if __name__ == "__main__":
    common.zoo_main(MODELS, build, __doc__)
