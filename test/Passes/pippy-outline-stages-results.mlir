// Outlining: every result of the pipeline comes from the last stage (a
// result made earlier is sent there and passed through, directly or relayed
// by --pippy-resolve-skips), and parameter ops of one name in one stage (a
// Torch-MLIR resource read by two literals) share one copy there.
// RUN: pippy-opt %s --pippy-outline-stages | FileCheck %s
// RUN: pippy-opt %s --pippy-outline-stages --pippy-resolve-skips="mode=relay" | FileCheck %s --check-prefix=RELAY

// CHECK-LABEL: func.func @forward(
func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) {
  // CHECK: %[[S0:.*]]:2 = pippy.stage 0
  // CHECK-NEXT: ^bb0(
  // CHECK-NEXT: %[[W:.*]] = pippy.param "w"
  // CHECK-NOT: pippy.param
  // CHECK: torch.aten.mm %{{.*}}, %[[W]]
  // CHECK: torch.aten.mm %{{.*}}, %[[W]]
  // CHECK: pippy.yield
  %w = pippy.param "w" : !torch.vtensor<[4,4],f32>
  %0 = torch.aten.mm %x, %w : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32>
  %w2 = pippy.param "w" : !torch.vtensor<[4,4],f32>
  %1 = torch.aten.mm %0, %w2 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32>
  %early = torch.aten.tanh %1 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  pippy.split_point
  // CHECK: %[[S1:.*]] = pippy.stage 1
  %2 = torch.aten.relu %1 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  pippy.split_point
  // CHECK: %[[S2:.*]]:2 = pippy.stage 2 (%[[S1]], %[[S0]]#1)
  // CHECK-NEXT: ^bb0(%{{.*}}: !torch.vtensor<[2,4],f32>, %[[PASS:.*]]: !torch.vtensor<[2,4],f32>):
  // CHECK: pippy.yield %[[PASS]], %{{.*}}
  // CHECK: pippy.yield %[[S2]]#1, %[[S2]]#0
  %3 = torch.aten.sigmoid %2 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  return %3, %early : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>
}

// RELAY: pippy.stage 1 ({{.*}}) : (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) -> (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>)
// RELAY: pippy.stage 2
