// A weights file that names the file the module was read from is refused,
// and that file is left as it was.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/in.mlir
// RUN: not pippy-opt %t/in.mlir --pippy-lift-params="weights=%t/./in.mlir" 2>&1 | FileCheck %s
// RUN: cmp %s %t/in.mlir
// CHECK: error: pippy-lift-params: weights={{.*}}in.mlir is the file this module was read from: writing it would destroy it; name another file
func.func @forward(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %w = torch.vtensor.literal(dense<1.0> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
  %int1 = torch.constant.int 1
  %y = torch.aten.add.Tensor %x, %w, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  return %y : !torch.vtensor<[2,3],f32>
}
