// Random ops in Torch-MLIR input get their streams when the weights are
// lifted, before any split: numbered in op order, after the streams already
// given (an op that has one keeps it), so that pippy-run --seed draws the
// same numbers however the graph is split. Ops that draw nothing get none.
// RUN: rm -rf %t && mkdir -p %t
// RUN: pippy-opt %s --pippy-lift-params="weights=%t/w.safetensors" | FileCheck %s

// CHECK-LABEL: func.func @forward(
func.func @forward(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
  %p = torch.constant.float 1.000000e-01
  %true = torch.constant.bool true
  %none = torch.constant.none
  %zero = torch.constant.float 0.000000e+00
  %one = torch.constant.float 1.000000e+00
  // CHECK: torch.aten.dropout {{.*}} {pippy.random_stream = 3 : i64}
  %0 = torch.aten.dropout %x, %p, %true : !torch.vtensor<[4,8],f32>, !torch.float, !torch.bool -> !torch.vtensor<[4,8],f32>
  // CHECK: torch.aten.relu %{{[0-9]+}} : !torch.vtensor
  %1 = torch.aten.relu %0 : !torch.vtensor<[4,8],f32> -> !torch.vtensor<[4,8],f32>
  // CHECK: torch.aten.bernoulli.p {{.*}} {pippy.random_stream = 2 : i64}
  %2 = torch.aten.bernoulli.p %1, %p, %none {pippy.random_stream = 2 : i64} : !torch.vtensor<[4,8],f32>, !torch.float, !torch.none -> !torch.vtensor<[4,8],f32>
  // CHECK: torch.aten.uniform {{.*}} {pippy.random_stream = 4 : i64}
  %3 = torch.aten.uniform %2, %zero, %one, %none : !torch.vtensor<[4,8],f32>, !torch.float, !torch.float, !torch.none -> !torch.vtensor<[4,8],f32>
  // CHECK: torch.aten.randn_like {{.*}} {pippy.random_stream = 5 : i64}
  %4 = torch.aten.randn_like %3, %none, %none, %none, %none, %none : !torch.vtensor<[4,8],f32>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[4,8],f32>
  return %4 : !torch.vtensor<[4,8],f32>
}
