// A buffer updated in place while training (here given a new value by
// pippy.assign) is stage state: every op that uses it stays in one stage,
// so no split point goes between its first and its last use, even where it
// would balance best (after the second mm).
// RUN: pippy-opt %s --pippy-split="stages=2" | FileCheck %s
// RUN: pippy-opt %s --pippy-split="stages=2 policy=uniform" | FileCheck %s

func.func @forward(%x: !torch.vtensor<[64,64],f32>) -> !torch.vtensor<[64,64],f32> {
  %w = pippy.param "w" : !torch.vtensor<[64,64],f32>
  %n = pippy.param "count" : !torch.vtensor<[],si64>
  %int1 = torch.constant.int 1
  %a = torch.aten.mm %x, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %n1 = torch.aten.add.Scalar %n, %int1, %int1 : !torch.vtensor<[],si64>, !torch.int, !torch.int -> !torch.vtensor<[],si64>
  %b = torch.aten.mm %a, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  pippy.assign %n = %n1 : !torch.vtensor<[],si64>
  %c = torch.aten.mm %b, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %d = torch.aten.mm %c, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  return %d : !torch.vtensor<[64,64],f32>
}

// CHECK:      pippy.stage 0
// CHECK:      torch.aten.add.Scalar
// CHECK-NOT:  pippy.stage 1
// CHECK:      pippy.assign
// CHECK:      pippy.stage 1
// CHECK:      torch.aten.mm
