// The schedule lowered ahead of time for a three-stage chain whose stages 0
// and 2 share a tied weight: 1F1B runs S-1-s warm-up forwards on stage s,
// and the tied stages all-reduce before stepping.
// RUN: pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=1f1b microbatches=2" | FileCheck %s --check-prefix=ONEF
// RUN: pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=gpipe microbatches=1" | FileCheck %s --check-prefix=GPIPE
// RUN: not pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=BAD
// Several stages on one rank: the stages hand their results over locally
// (no SEND/RECV between them) and the rank all-reduces its tied groups once.
// RUN: pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=looped-bfs ranks=1 microbatches=2" | FileCheck %s --check-prefix=BFS
// RUN: not pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=zbv microbatches=2" 2>&1 | FileCheck %s --check-prefix=ZBV
// RUN: not pippy-opt %S/pippy-resolve-tied.mlir --pippy-lower-schedule="schedule=1f1b ranks=2" 2>&1 | FileCheck %s --check-prefix=FIT

// ONEF: pippy.schedule = {kind = "1f1b", microbatches = 2 : i64, ranks = [
// ONEF-SAME: "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0ALLREDUCE_TIED 0STEP",
// ONEF-SAME: "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 1RECV_B0 1B0 1SEND_B0 1RECV_B1 1B1 1SEND_B1 1STEP",
// ONEF-SAME: "2RECV_F0 2F0 2B0 2SEND_B0 2RECV_F1 2F1 2B1 2SEND_B1 2ALLREDUCE_TIED 2STEP"]}

// GPIPE: ranks = ["0F0 0SEND_F0 0RECV_B0 0B0 0ALLREDUCE_TIED 0STEP", "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0 1STEP", "2RECV_F0 2F0 2B0 2SEND_B0 2ALLREDUCE_TIED 2STEP"]

// BAD: error: unknown schedule 'zigzag'; expected one of gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb1p, zbv, dualpipev

// BFS: pippy.schedule = {kind = "looped-bfs", microbatches = 2 : i64, ranks = [
// BFS-SAME: "0F0 0F1 1F0 1F1 2F0 2F1 2B1 2B0 1B1 1B0 0B1 0B0 0ALLREDUCE_TIED 0STEP 1STEP 2STEP"]}

// ZBV: error: zbv: 3 stages on 1 rank: this kind needs exactly two stages per rank; kinds that fit 3 stages on 1 rank: interleaved-1f1b, looped-bfs, zb1p

// FIT: error: 1f1b: 3 stages on 2 ranks: this kind runs one stage per rank (run it on 3 ranks: --nproc 3)
