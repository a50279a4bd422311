// Split points land before the first op of a module (`:begin`) or after its
// last op (`:end`), counting nested modules and ignoring parameters and
// constants; existing markers are kept.
// RUN: pippy-opt %s --pippy-annotate-split-points="points=layers.1:begin,layers.1:end" --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s

// CHECK-LABEL: func.func @forward(
func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32> {
  // CHECK-NEXT: pippy.param "layers.1.weight"
  // CHECK-NEXT: torch.constant.int 1
  %w = pippy.param "layers.1.weight" : !torch.vtensor<[4,4],f32> loc("layers.1")
  %int1 = torch.constant.int 1 loc("layers.1")
  // CHECK-NEXT: torch.aten.relu {{.*}} loc("layers.0")
  %0 = torch.aten.relu %x : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("layers.0")
  // CHECK-NEXT: pippy.split_point loc("layers.1:begin")
  // CHECK-NEXT: torch.aten.mm {{.*}} loc("layers.1.fc")
  %1 = torch.aten.mm %0, %w : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32> loc("layers.1.fc")
  // CHECK-NEXT: torch.aten.add.Tensor {{.*}} loc("layers.1")
  // CHECK-NEXT: pippy.split_point loc("layers.1:end")
  %2 = torch.aten.add.Tensor %1, %0, %int1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f32> loc("layers.1")
  // CHECK-NEXT: pippy.split_point
  pippy.split_point
  // layers.10 is not inside layers.1.
  // CHECK-NEXT: torch.aten.tanh {{.*}} loc("layers.10")
  %3 = torch.aten.tanh %2 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("layers.10")
  return %3 : !torch.vtensor<[2,4],f32>
}
