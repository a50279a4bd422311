// profile=FILE: measured times replace the cost model. The same five ops
// (a sum over a large parameter, then four mms) with the last mm measured
// 100x slower than the others go to [four ops | the slow mm]; by the cost
// model the cut comes after the first mm. A profile of another model (other
// op names or counts) is an error naming the difference.
// RUN: split-file %s %t
// RUN: pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-place-split-points="stages=2 profile=%t/slow-last.json" | FileCheck %s --check-prefix=PROFILE
// RUN: pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-place-split-points="stages=2" | FileCheck %s --check-prefix=MODEL
// RUN: not pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-split="stages=2 profile=%t/wrong-op.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WRONGOP
// RUN: not pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-split="stages=2 profile=%t/short.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: not pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-split="stages=2 profile=%t/missing.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING

// PROFILE-COUNT-4: torch.aten.{{sum.dim_IntList|mm}}
// PROFILE-NEXT:    pippy.split_point
// PROFILE-NEXT:    torch.aten.mm

// MODEL:      torch.aten.mm
// MODEL-NEXT: pippy.split_point

// WRONGOP: error: profile {{.*}}wrong-op.json: op 1 is torch.aten.relu in the profile but torch.aten.mm in the function
// SHORT: error: profile {{.*}}short.json: it has 2 ops but the function has 5 (parameters and constants not counted); was it measured on this model?
// MISSING: error: profile {{.*}}missing.json: cannot read it

//--- slow-last.json
{"format": "pippy-profile", "version": 1, "transfer_ns_per_byte": 0.0,
 "ops": [{"index": 0, "op": "torch.aten.sum.dim_IntList", "forward_us": 1.0, "backward_us": 1.0},
         {"index": 1, "op": "torch.aten.mm", "forward_us": 1.0, "backward_us": 1.0},
         {"index": 2, "op": "torch.aten.mm", "forward_us": 1.0, "backward_us": 1.0},
         {"index": 3, "op": "torch.aten.mm", "forward_us": 1.0, "backward_us": 1.0},
         {"index": 4, "op": "torch.aten.mm", "forward_us": 100.0, "backward_us": 100.0}]}
//--- wrong-op.json
{"format": "pippy-profile", "version": 1,
 "ops": [{"index": 0, "op": "torch.aten.sum.dim_IntList", "forward_us": 1.0},
         {"index": 1, "op": "torch.aten.relu", "forward_us": 1.0},
         {"index": 2, "op": "torch.aten.mm", "forward_us": 1.0},
         {"index": 3, "op": "torch.aten.mm", "forward_us": 1.0},
         {"index": 4, "op": "torch.aten.mm", "forward_us": 1.0}]}
//--- short.json
{"format": "pippy-profile", "version": 1,
 "ops": [{"index": 0, "op": "torch.aten.sum.dim_IntList", "forward_us": 1.0},
         {"index": 1, "op": "torch.aten.mm", "forward_us": 1.0}]}
