// Outlining: a residual block cut in the middle, a skip connection spanning
// three stages sent directly, a tied parameter copied into two stages with a
// tied group, constants copied where used, and a marker placed by hand next
// to one placed by module path.
// RUN: pippy-opt %s --pippy-annotate-split-points="points=block.fc2:begin" --pippy-outline-stages | FileCheck %s
// RUN: pippy-opt %s --pippy-annotate-split-points="points=block.fc2:begin" --pippy-outline-stages | pippy-opt | FileCheck %s

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.*]]: !torch.vtensor<[2,4],f32>
func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %w = pippy.param "embed.weight" : !torch.vtensor<[4,4],f32>
  %w1 = pippy.param "block.fc1.weight" : !torch.vtensor<[4,4],f32>
  %w2 = pippy.param "block.fc2.weight" : !torch.vtensor<[4,4],f32>
  %int1 = torch.constant.int 1
  %e = torch.aten.mm %x, %w : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32> loc("embed")
  %h = torch.aten.mm %e, %w1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32> loc("block.fc1")
  %r = torch.aten.relu %h : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("block.act")
  %o = torch.aten.mm %r, %w2 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32> loc("block.fc2")
  %res = torch.aten.add.Tensor %o, %e, %int1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f32> loc("block")
  pippy.split_point
  %t = torch.aten.tanh %res : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("head")
  %s = torch.aten.add.Tensor %t, %e, %int1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f32> loc("head")
  %y = torch.aten.mm %s, %w : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32> loc("head")
  return %y : !torch.vtensor<[2,4],f32>
}

// CHECK:      %[[P:.*]] = pippy.pipeline tied [#pippy.tied_group<"embed.weight", stages = [0, 2]>] -> !torch.vtensor<[2,4],f32> {
// Stage 0 sends the residual branch's input twice: to stage 1 for the
// residual add and to stage 2 as a skip connection.
// CHECK-NEXT:   %[[S0:.*]]:2 = pippy.stage 0 (%[[X]]) : (!torch.vtensor<[2,4],f32>) -> (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) {
// CHECK-NEXT:   ^bb0(%[[A0:.*]]: !torch.vtensor<[2,4],f32>):
// CHECK-NEXT:     %[[W0:.*]] = pippy.param "embed.weight"
// CHECK-NEXT:     %[[E:.*]] = torch.aten.mm %[[A0]], %[[W0]]
// CHECK-NEXT:     %[[W1:.*]] = pippy.param "block.fc1.weight"
// CHECK-NEXT:     %[[H:.*]] = torch.aten.mm %[[E]], %[[W1]]
// CHECK-NEXT:     %[[R:.*]] = torch.aten.relu %[[H]]
// CHECK-NEXT:     pippy.yield %[[E]], %[[R]]
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[S1:.*]] = pippy.stage 1 (%[[S0]]#1, %[[S0]]#0) : (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32> {
// CHECK-NEXT:   ^bb0(%[[R1:.*]]: !torch.vtensor<[2,4],f32>, %[[E1:.*]]: !torch.vtensor<[2,4],f32>):
// CHECK-NEXT:     pippy.param "block.fc2.weight"
// CHECK-NEXT:     %[[O:.*]] = torch.aten.mm %[[R1]]
// CHECK-NEXT:     %[[ONE:.*]] = torch.constant.int 1
// CHECK-NEXT:     %[[RES:.*]] = torch.aten.add.Tensor %[[O]], %[[E1]], %[[ONE]]
// CHECK-NEXT:     pippy.yield %[[RES]]
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[S2:.*]] = pippy.stage 2 (%[[S1]], %[[S0]]#0) : (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32> {
// CHECK-NEXT:   ^bb0(%[[IN2:.*]]: !torch.vtensor<[2,4],f32>, %[[SKIP:.*]]: !torch.vtensor<[2,4],f32>):
// CHECK-NEXT:     %[[T:.*]] = torch.aten.tanh %[[IN2]]
// CHECK-NEXT:     %[[ONE2:.*]] = torch.constant.int 1
// CHECK-NEXT:     %[[SUM:.*]] = torch.aten.add.Tensor %[[T]], %[[SKIP]], %[[ONE2]]
// CHECK-NEXT:     %[[W2:.*]] = pippy.param "embed.weight"
// CHECK-NEXT:     %[[Y:.*]] = torch.aten.mm %[[SUM]], %[[W2]]
// CHECK-NEXT:     pippy.yield %[[Y]]
// CHECK-NEXT:   }
// CHECK-NEXT:   pippy.yield %[[S2]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[P]]
