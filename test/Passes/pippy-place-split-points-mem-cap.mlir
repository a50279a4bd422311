// mem-cap: a sum over a 1 MiB parameter (1048576 + 256 result bytes) comes
// before four 64x64 mms (16 KiB weight + 16 KiB result each). Uncapped, the
// optimum puts the sum with the first mm (1081600 bytes in stage 0); a cap of
// 1060000 leaves the sum alone (1048832 bytes) and the four mms together
// (131072), a slower split the report shows against the uncapped optimum. A
// cap below what the sum alone needs is an error.
// RUN: pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-split="stages=2" --pippy-report -o /dev/null | FileCheck %s --check-prefix=FREE
// RUN: pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-split="stages=2 mem-cap=1060000" --pippy-report -o /dev/null | FileCheck %s --check-prefix=CAP
// RUN: pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-place-split-points="stages=2 mem-cap=1060000" | FileCheck %s --check-prefix=MARK
// RUN: not pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-split="stages=2 mem-cap=1040000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TOOSMALL
// RUN: not pippy-opt %S/Inputs/mm-chain-big.mlir --pippy-split="stages=2 mem-cap=-5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: mem-cap=-5 is negative; it takes a stage's bytes (0: no cap)

// FREE:      0            2       2       1064960
// FREE-NEXT: 1            3       3         49152
// FREE:      bottleneck: 1900800; optimum for 2 stages: 1900800

// CAP:      0            1       1       1048576
// CAP-NEXT: 1            4       4         65536
// CAP:      bottleneck: 2293760; optimum for 2 stages: 1900800 (bottleneck / optimum: 1.207)

// MARK:      torch.aten.sum.dim_IntList
// MARK-NEXT: pippy.split_point
// MARK-NEXT: torch.aten.mm

// TOOSMALL: error: no split into 2 stages keeps every stage within mem-cap=1040000 bytes (parameters + activations; the largest op alone needs 1048832)
