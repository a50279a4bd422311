// A tensor whose shape depends on the data (pippy-import marks it) cannot
// cross stages, so no split point goes where one is live. Four equal mms:
// the best cut is after the second, where masked_select's result is live;
// without the mark (FREE) the placer cuts there, with it the placer keeps
// masked_select and its sum in one stage.
// RUN: pippy-opt %s --pippy-place-split-points="stages=2" 2>&1 | FileCheck %s --check-prefix=BALANCED
// RUN: sed -e 's/{pippy.data_dependent_shape = array<i64: 0>}//' %s | pippy-opt --pippy-place-split-points="stages=2" 2>&1 | FileCheck %s --check-prefix=FREE
// RUN: pippy-opt %s --pippy-split="stages=2" | FileCheck %s --check-prefix=SPLIT
// RUN: not pippy-opt %s --pippy-place-split-points="stages=6" 2>&1 | FileCheck %s --check-prefix=TOOMANY

func.func @forward(%x: !torch.vtensor<[64,64],f32>) -> !torch.vtensor<[64,64],f32> {
  %w = pippy.param "w" : !torch.vtensor<[64,64],f32>
  %int0 = torch.constant.int 0
  %none = torch.constant.none
  %a = torch.aten.mm %x, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %m = torch.aten.gt.Scalar %a, %int0 : !torch.vtensor<[64,64],f32>, !torch.int -> !torch.vtensor<[64,64],i1>
  %s = torch.aten.masked_select %a, %m {pippy.data_dependent_shape = array<i64: 0>} : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],i1> -> !torch.vtensor<[9],f32>
  %b = torch.aten.mm %a, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %c = torch.aten.mm %b, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %t = torch.aten.sum %s, %none : !torch.vtensor<[9],f32>, !torch.none -> !torch.vtensor<[],f32>
  %e = torch.aten.mul.Tensor %c, %t : !torch.vtensor<[64,64],f32>, !torch.vtensor<[],f32> -> !torch.vtensor<[64,64],f32>
  %f = torch.aten.mm %e, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  return %f : !torch.vtensor<[64,64],f32>
}

// BALANCED:     torch.aten.masked_select
// BALANCED-NOT: pippy.split_point
// BALANCED:     torch.aten.sum
// FREE:         torch.aten.masked_select
// FREE-NEXT:    torch.aten.mm
// FREE-NEXT:    pippy.split_point
// FREE-NEXT:    torch.aten.mm
// SPLIT:        pippy.stage 0
// SPLIT:        torch.aten.masked_select
// SPLIT-NOT:    pippy.stage 1
// SPLIT:        torch.aten.sum
// TOOMANY: error: cannot cut into 6 stages: only 4 places between ops have nothing but tensors live across them (lists, scalars and tensors of data-dependent shape cannot cross stages)
