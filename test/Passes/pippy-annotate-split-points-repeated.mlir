// A module called twice (one module's weights used at two depths) has its
// ops in two separate runs: `shared:begin` splits before the first run and
// `shared:end` after the last, each with a warning saying so.
// RUN: pippy-opt %s --pippy-annotate-split-points="points=shared:begin" 2>&1 | FileCheck %s --check-prefix=BEGIN
// RUN: pippy-opt %s --pippy-annotate-split-points="points=shared:end" 2>&1 | FileCheck %s --check-prefix=END
// RUN: pippy-opt %s --pippy-annotate-split-points="points=head:begin" 2>&1 | FileCheck %s --check-prefix=ONCE

// BEGIN: warning: split point 'shared:begin': module 'shared' runs 2 times (its ops come in 2 separate runs, as when one module is called repeatedly); the split goes before its first run only
// BEGIN: pippy.split_point
// BEGIN-NEXT: torch.aten.tanh %arg0
// BEGIN-NOT: pippy.split_point

// END: warning: split point 'shared:end': module 'shared' runs 2 times {{.*}}; the split goes after its last run only
// END-NOT: pippy.split_point
// END: torch.aten.tanh %1
// END-NEXT: pippy.split_point
// END-NEXT: torch.aten.relu

// ONCE-NOT: warning
// ONCE: pippy.split_point
func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %0 = torch.aten.tanh %x : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("shared")
  %1 = torch.aten.sigmoid %0 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("mid")
  %2 = torch.aten.tanh %1 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("shared")
  %3 = torch.aten.relu %2 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("head")
  return %3 : !torch.vtensor<[2,4],f32>
}
