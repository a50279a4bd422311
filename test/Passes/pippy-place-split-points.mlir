// Automatic split points. Three matmuls of equal cost and a cheap tail:
// balanced cuts so that the heavy ops are spread, params balances parameter
// bytes (counted at first use), uniform balances op counts.
// RUN: pippy-opt %s --pippy-place-split-points="stages=2" | FileCheck %s --check-prefix=BALANCED
// RUN: pippy-opt %s --pippy-place-split-points="stages=2 policy=params" | FileCheck %s --check-prefix=PARAMS
// RUN: pippy-opt %s --pippy-place-split-points="stages=3 policy=uniform" | FileCheck %s --check-prefix=UNIFORM
// RUN: pippy-opt %s --pippy-split="stages=2" | FileCheck %s --check-prefix=SPLIT

func.func @forward(%x: !torch.vtensor<[64,64],f32>) -> !torch.vtensor<[64,64],f32> {
  %w0 = pippy.param "w0" : !torch.vtensor<[64,64],f32>
  %w1 = pippy.param "w1" : !torch.vtensor<[64,64],f32>
  %big = pippy.param "big" : !torch.vtensor<[64,4096],f32>
  %none = torch.constant.none
  %false = torch.constant.bool false
  %a = torch.aten.mm %x, %w0 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %b = torch.aten.mm %a, %w1 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %c = torch.aten.mm %b, %w1 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %d = torch.aten.mm %c, %w0 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %s = torch.aten.sum.dim_IntList %big, %none, %false, %none : !torch.vtensor<[64,4096],f32>, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[64],f32>
  %r = torch.aten.relu %d : !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  return %r : !torch.vtensor<[64,64],f32>
}

// Balanced: each mm costs 2*64*64*64 FLOPs + 48 KiB moved, the sum reads
// 1 MiB; the best cut leaves three mms in stage 0.
// BALANCED:      torch.aten.mm %arg0
// BALANCED-NEXT: torch.aten.mm
// BALANCED-NEXT: torch.aten.mm
// BALANCED-NEXT: pippy.split_point
// BALANCED-NEXT: torch.aten.mm
// BALANCED-NEXT: torch.aten.sum.dim_IntList
// BALANCED-NEXT: torch.aten.relu
// BALANCED-NOT:  pippy.split_point

// Params: "big" (1 MiB, first used by the sum) outweighs everything else, so
// it sits in the last stage and the first stage takes w0 and w1.
// PARAMS:      torch.aten.mm %arg0
// PARAMS:      pippy.split_point
// PARAMS-NOT:  pippy.split_point
// PARAMS:      torch.aten.sum.dim_IntList

// Uniform: six ops, two per stage.
// UNIFORM:      torch.aten.mm %arg0
// UNIFORM-NEXT: torch.aten.mm
// UNIFORM-NEXT: pippy.split_point
// UNIFORM-NEXT: torch.aten.mm
// UNIFORM-NEXT: torch.aten.mm
// UNIFORM-NEXT: pippy.split_point
// UNIFORM-NEXT: torch.aten.sum.dim_IntList
// UNIFORM-NEXT: torch.aten.relu

// --pippy-split places the same cut and outlines two stages.
// SPLIT:     pippy.pipeline
// SPLIT:     pippy.stage 0
// SPLIT-COUNT-3: torch.aten.mm
// SPLIT:     pippy.stage 1
// SPLIT:     torch.aten.mm
// SPLIT:     torch.aten.sum.dim_IntList
// SPLIT-NOT: pippy.stage 2
