// The schedule lowered ahead of time for a three-stage chain whose stages 0
// and 2 share a tied weight: 1F1B runs S-1-s warm-up forwards on stage s,
// and the tied stages all-reduce before stepping.
// RUN: pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=1f1b microbatches=2" | FileCheck %s --check-prefix=ONEF
// RUN: pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=gpipe microbatches=1" | FileCheck %s --check-prefix=GPIPE
// RUN: not pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=BAD

// ONEF: pippy.schedule = {kind = "1f1b", microbatches = 2 : i64, ranks = [
// ONEF-SAME: "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0ALLREDUCE_TIED 0STEP",
// ONEF-SAME: "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 1RECV_B0 1B0 1SEND_B0 1RECV_B1 1B1 1SEND_B1 1STEP",
// ONEF-SAME: "2RECV_F0 2F0 2B0 2SEND_B0 2RECV_F1 2F1 2B1 2SEND_B1 2ALLREDUCE_TIED 2STEP"]}

// GPIPE: ranks = ["0F0 0SEND_F0 0RECV_B0 0B0 0ALLREDUCE_TIED 0STEP", "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0 1STEP", "2RECV_F0 2F0 2B0 2SEND_B0 2ALLREDUCE_TIED 2STEP"]

// BAD: error: unknown schedule 'zigzag'; expected gpipe or 1f1b
