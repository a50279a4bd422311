// The stage table of a two-stage split, by the documented cost formulas:
// stage 0 holds three 64x64x64 mms (2*64^3 FLOPs and 48 KiB moved each),
// stage 1 one mm, a sum over a 1 MiB parameter and a relu; one 16 KiB
// activation crosses. The IR itself is unchanged.
// RUN: pippy-opt %S/Inputs/mms-and-sum.mlir --pippy-split="stages=2" --pippy-report -o %t.mlir | FileCheck %s --check-prefix=TEXT --strict-whitespace
// RUN: pippy-opt %S/Inputs/mms-and-sum.mlir --pippy-split="stages=2" -o %t.pipe.mlir
// RUN: pippy-opt %t.pipe.mlir --pippy-report=format=json -o %t.same.mlir | FileCheck %s --check-prefix=JSON
// RUN: pippy-opt %t.pipe.mlir | diff - %t.same.mlir
// RUN: pippy-opt %S/Inputs/mms-and-sum.mlir --pippy-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOPIPE
// The params policy puts the 1 MiB parameter's stage alone, which is slower
// than the optimum the report computes for two stages.
// RUN: pippy-opt %S/Inputs/mms-and-sum.mlir --pippy-split="stages=2 policy=params" --pippy-report=format=json -o /dev/null | FileCheck %s --check-prefix=PARAMS

// TEXT:      stage      ops  params   param_bytes           flops   bytes_moved  activation_bytes  recv_bytes  send_bytes       predicted
// TEXT-NEXT: 0            3       2         32768         1572864        147456             49152           0       16384         1736704
// TEXT-NEXT: 1            3       2       1064960          790528       1130752             33024       16384           0         1937664
// TEXT-NEXT: balance ratio (slowest / mean): 1.055
// TEXT-NEXT: bottleneck: 1937664; optimum for 2 stages: 1937664 (bottleneck / optimum: 1.000)

// JSON:      "balance_ratio": 1.05
// JSON:      "bottleneck": 1937664,
// JSON:      "optimum": 1937664,
// JSON:      "flops": 1572864,
// JSON:      "predicted": 1736704,
// JSON:      "send_bytes": 16384,
// JSON:      "flops": 790528,
// JSON:      "param_bytes": 1064960,
// JSON:      "predicted": 1937664,
// JSON:      "recv_bytes": 16384,

// NOPIPE: warning: no pippy.pipeline to report on; split the model first (--pippy-split)

// PARAMS-NOT: "bottleneck": 1937664,
// PARAMS:     "bottleneck": {{2[0-9][0-9][0-9][0-9][0-9][0-9]}},
// PARAMS:     "optimum": 1937664,
