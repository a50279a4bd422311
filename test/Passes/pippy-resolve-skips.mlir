// Relay mode routes a skip connection through the stages in between; a value
// relayed to two consumers passes each stage once; direct mode changes
// nothing.
// RUN: pippy-opt %s --pippy-resolve-skips="mode=relay" | FileCheck %s --check-prefix=RELAY
// RUN: pippy-opt %s --pippy-resolve-skips | FileCheck %s --check-prefix=DIRECT
// RUN: not pippy-opt %s --pippy-resolve-skips="mode=teleport" 2>&1 | FileCheck %s --check-prefix=BAD

!t = !torch.vtensor<[2],f32>
func.func @forward(%x: !t) -> !t {
  %0 = pippy.pipeline -> !t {
    %s0:2 = pippy.stage 0 (%x) : (!t) -> (!t, !t) {
    ^bb0(%a: !t):
      %r = torch.aten.relu %a : !t -> !t
      pippy.yield %r, %a : !t, !t
    }
    %s1 = pippy.stage 1 (%s0#0) : (!t) -> !t {
    ^bb0(%a: !t):
      %r = torch.aten.tanh %a : !t -> !t
      pippy.yield %r : !t
    }
    %s2 = pippy.stage 2 (%s1, %s0#1) : (!t, !t) -> !t {
    ^bb0(%a: !t, %skip: !t):
      %int1 = torch.constant.int 1
      %r = torch.aten.add.Tensor %a, %skip, %int1 : !t, !t, !torch.int -> !t
      pippy.yield %r : !t
    }
    %s3 = pippy.stage 3 (%s2, %s0#1) : (!t, !t) -> !t {
    ^bb0(%a: !t, %skip: !t):
      %r = torch.aten.mul.Tensor %a, %skip : !t, !t -> !t
      pippy.yield %r : !t
    }
    pippy.yield %s3 : !t
  }
  return %0 : !t
}

// RELAY:      %[[S0:.*]]:2 = pippy.stage 0 (%arg0)
// RELAY:      %[[S1:.*]]:2 = pippy.stage 1 (%[[S0]]#0, %[[S0]]#1) : (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) {
// RELAY-NEXT: ^bb0(%{{.*}}: !torch.vtensor<[2],f32>, %[[P1:.*]]: !torch.vtensor<[2],f32>):
// RELAY-NEXT:   %[[T:.*]] = torch.aten.tanh
// RELAY-NEXT:   pippy.yield %[[T]], %[[P1]]
// Stage 2 already receives the skip: it forwards that operand to stage 3.
// RELAY:      %[[S2:.*]]:2 = pippy.stage 2 (%[[S1]]#0, %[[S1]]#1) : (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) {
// RELAY-NEXT: ^bb0(%{{.*}}: !torch.vtensor<[2],f32>, %[[P2:.*]]: !torch.vtensor<[2],f32>):
// RELAY:        pippy.yield %{{.*}}, %[[P2]] :
// RELAY:      pippy.stage 3 (%[[S2]]#0, %[[S2]]#1)

// DIRECT: pippy.stage 2 (%{{.*}}, %{{.*}}#1)
// DIRECT: pippy.stage 3 (%{{.*}}, %{{.*}}#1)

// BAD: error: unknown skip mode 'teleport'; expected direct or relay
