// Megatron-style tensor parallelism: an MLP's linear pair (linear -> gelu ->
// identity dropout -> linear) is sharded over tp ranks, the first by output
// features, the second by input features; tp_copy enters the region,
// tp_reduce sums the partial results, and the second bias is added once,
// after the sum. An embedding is split by vocabulary (rows), its lookups
// summed; a tied or padded one stays whole. Attention is split by heads: q, k and v column-parallel,
// the views, transposes, batched matmuls, scaling, mask and softmax on the
// heads each rank holds, the output projection row-parallel. Linears that
// are not such a region stay replicated, each marked with why; a tied
// weight, a drawing dropout and a size that does not divide stop a region.
// RUN: pippy-opt %s -split-input-file --pippy-tensor-parallel=tp=2 | FileCheck %s
// RUN: pippy-opt %s -split-input-file --pippy-tensor-parallel=tp=3 | FileCheck %s --check-prefix=THREE
// RUN: not pippy-opt %s -split-input-file --pippy-tensor-parallel=tp=1 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: pippy-opt %s -split-input-file --pippy-tensor-parallel=tp=2 --pippy-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: pippy-opt %s -split-input-file --pippy-tensor-parallel=tp=2 --pippy-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON

// CHECK: module attributes {pippy.tensor_parallel = 2 : i64}
// CHECK-LABEL: pippy.stage 0
// CHECK:      %[[X:.*]]: !torch.vtensor<[4,16],f32>
// CHECK:      %[[C:.*]] = pippy.tp_copy %[[X]] {tp = 2 : i64} : !torch.vtensor<[4,16],f32>
// CHECK:      %[[W1:.*]] = pippy.param "mlp.fc.weight" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[32,16],f32>
// CHECK:      %[[B1:.*]] = pippy.param "mlp.fc.bias" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[32],f32>
// CHECK:      %[[H:.*]] = torch.aten.linear %[[C]], %[[W1]], %[[B1]] {pippy.tensor_parallel = "column"} : {{.*}} -> !torch.vtensor<[4,32],f32>
// CHECK:      %[[G:.*]] = torch.aten.gelu %[[H]], %{{.*}} : !torch.vtensor<[4,32],f32>, !torch.str -> !torch.vtensor<[4,32],f32>
// CHECK:      %[[D:.*]] = torch.aten.dropout %[[G]], {{.*}} -> !torch.vtensor<[4,32],f32>
// CHECK:      %[[W2:.*]] = pippy.param "mlp.proj.weight" {pippy.shard = array<i64: 1, 2>} : !torch.vtensor<[16,32],f32>
// CHECK:      %[[B2:.*]] = pippy.param "mlp.proj.bias" : !torch.vtensor<[16],f32>
// CHECK:      %[[NONE:.*]] = torch.constant.none
// CHECK:      %[[P:.*]] = torch.aten.linear %[[D]], %[[W2]], %[[NONE]] {pippy.tensor_parallel = "row"} : {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:      %[[R:.*]] = pippy.tp_reduce %[[P]] {tp = 2 : i64} : !torch.vtensor<[4,16],f32>
// CHECK:      %[[Y:.*]] = torch.aten.add.Tensor %[[R]], %[[B2]], %{{.*}} : {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:      torch.aten.relu %[[Y]]
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: its weight or bias is not a parameter it alone uses (tied or shared weights stay whole), or its shapes are not static"}
// CHECK-LABEL: pippy.stage 1
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: its weight or bias is not a parameter it alone uses (tied or shared weights stay whole), or its shapes are not static"}
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: no linear it could pair with reaches its input through ops a split can pass"}
// A pair with nothing between the two linears.
// CHECK:      pippy.tp_copy
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "column"} : {{.*}} -> !torch.vtensor<[4,8],f32>
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "row"}
// CHECK:      pippy.tp_reduce

// THREE: torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: 64 features do not divide by tp 3"}
// THREE: torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: 16 features do not divide by tp 3"}

// ONE: error: --pippy-tensor-parallel needs tp of at least 2; got 1

// REPORT:      tensor parallel: 2 column-parallel, 2 row-parallel, 0 vocabulary-parallel, 3 replicated
// REPORT-NEXT:   stage 0 mlp.fc.weight: column
// REPORT-NEXT:   stage 0 mlp.proj.weight: row
// REPORT-NEXT:   stage 0 tied.weight: replicated: its weight or bias is not a parameter it alone uses (tied or shared weights stay whole), or its shapes are not static
// REPORT-NEXT:   stage 1 tied.weight: replicated: its weight or bias is not a parameter it alone uses (tied or shared weights stay whole), or its shapes are not static
// REPORT-NEXT:   stage 1 out.weight: replicated: no linear it could pair with reaches its input through ops a split can pass
// REPORT-NEXT:   stage 1 last.weight: column
// REPORT-NEXT:   stage 1 final.weight: row

// JSON: "tensor_parallel": [
// JSON:     "module": "mlp.fc.weight",
// JSON-NEXT: "role": "column",
// JSON-NEXT: "stage": 0

// The attention block (graph IR: no report).
// CHECK-LABEL: func.func @forward(%arg0: !torch.vtensor<[2,4,16],f32>)
// CHECK:      %[[C:.*]] = pippy.tp_copy %arg0 {tp = 2 : i64}
// CHECK:      pippy.param "attn.q.weight" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[8,16],f32>
// CHECK:      %[[Q:.*]] = torch.aten.linear %[[C]], {{.*}} {pippy.tensor_parallel = "column"} : {{.*}} -> !torch.vtensor<[2,4,8],f32>
// CHECK:      %[[H:.*]] = torch.constant.int 2
// CHECK-NEXT: %[[L:.*]] = torch.prim.ListConstruct %{{.*}}, %{{.*}}, %[[H]], %{{.*}} :
// CHECK-NEXT: torch.aten.view %[[Q]], %[[L]] : !torch.vtensor<[2,4,8],f32>, !torch.list<int> -> !torch.vtensor<[2,4,2,4],f32>
// CHECK:      torch.aten.transpose.int {{.*}} -> !torch.vtensor<[2,2,4,4],f32>
// CHECK:      torch.aten.linear %[[C]], {{.*}} {pippy.tensor_parallel = "column"}
// CHECK:      torch.aten.linear %[[C]], {{.*}} {pippy.tensor_parallel = "column"}
// CHECK:      torch.aten.matmul {{.*}} -> !torch.vtensor<[2,2,4,4],f32>
// CHECK:      torch.aten.masked_fill.Scalar {{.*}} : !torch.vtensor<[2,2,4,4],f32>, !torch.vtensor<[1,1,4,4],i1>, !torch.float -> !torch.vtensor<[2,2,4,4],f32>
// CHECK:      torch.aten.softmax.int {{.*}} -> !torch.vtensor<[2,2,4,4],f32>
// CHECK:      torch.aten.view {{.*}} : !torch.vtensor<[2,4,2,4],f32>, !torch.list<int> -> !torch.vtensor<[2,4,8],f32>
// CHECK:      pippy.param "attn.proj.weight" {pippy.shard = array<i64: 1, 2>} : !torch.vtensor<[16,8],f32>
// CHECK:      %[[P:.*]] = torch.aten.linear {{.*}} {pippy.tensor_parallel = "row"}
// CHECK:      %[[R:.*]] = pippy.tp_reduce %[[P]] {tp = 2 : i64} : !torch.vtensor<[2,4,16],f32>
// CHECK:      torch.aten.add.Tensor %[[R]], %{{.*}}, %{{.*}}

module {
func.func @forward(%arg0: !torch.vtensor<[4,16],f32>) -> !torch.vtensor<[4,16],f32> {
  %0 = pippy.pipeline tied [#pippy.tied_group<"tied.weight", stages = [0, 1]>] -> !torch.vtensor<[4,16],f32> {
    %s0 = pippy.stage 0 (%arg0) : (!torch.vtensor<[4,16],f32>) -> !torch.vtensor<[4,16],f32> {
    ^bb0(%x: !torch.vtensor<[4,16],f32>):
      %w1 = pippy.param "mlp.fc.weight" : !torch.vtensor<[64,16],f32>
      %b1 = pippy.param "mlp.fc.bias" : !torch.vtensor<[64],f32>
      %h = torch.aten.linear %x, %w1, %b1 : !torch.vtensor<[4,16],f32>, !torch.vtensor<[64,16],f32>, !torch.vtensor<[64],f32> -> !torch.vtensor<[4,64],f32>
      %str = torch.constant.str "none"
      %g = torch.aten.gelu %h, %str : !torch.vtensor<[4,64],f32>, !torch.str -> !torch.vtensor<[4,64],f32>
      %p0 = torch.constant.float 0.000000e+00
      %true = torch.constant.bool true
      %d = torch.aten.dropout %g, %p0, %true : !torch.vtensor<[4,64],f32>, !torch.float, !torch.bool -> !torch.vtensor<[4,64],f32>
      %w2 = pippy.param "mlp.proj.weight" : !torch.vtensor<[16,64],f32>
      %b2 = pippy.param "mlp.proj.bias" : !torch.vtensor<[16],f32>
      %y = torch.aten.linear %d, %w2, %b2 : !torch.vtensor<[4,64],f32>, !torch.vtensor<[16,64],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[4,16],f32>
      %r = torch.aten.relu %y : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
      %t = pippy.param "tied.weight" : !torch.vtensor<[16,16],f32>
      %none = torch.constant.none
      %z = torch.aten.linear %r, %t, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      pippy.yield %z : !torch.vtensor<[4,16],f32>
    }
    %s1 = pippy.stage 1 (%s0) : (!torch.vtensor<[4,16],f32>) -> !torch.vtensor<[4,16],f32> {
    ^bb0(%x: !torch.vtensor<[4,16],f32>):
      // The tied weight stays whole, so its pair does not form.
      %t = pippy.param "tied.weight" : !torch.vtensor<[16,16],f32>
      %none = torch.constant.none
      %a = torch.aten.linear %x, %t, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      %w3 = pippy.param "out.weight" : !torch.vtensor<[16,16],f32>
      %b = torch.aten.linear %a, %w3, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      // A dropout that draws stops a pair.
      %p = torch.constant.float 1.000000e-01
      %true = torch.constant.bool true
      %d = torch.aten.dropout %b, %p, %true : !torch.vtensor<[4,16],f32>, !torch.float, !torch.bool -> !torch.vtensor<[4,16],f32>
      %w4 = pippy.param "last.weight" : !torch.vtensor<[16,16],f32>
      %c = torch.aten.linear %d, %w4, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      %w5 = pippy.param "final.weight" : !torch.vtensor<[16,16],f32>
      %e = torch.aten.linear %c, %w5, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      pippy.yield %e : !torch.vtensor<[4,16],f32>
    }
    pippy.yield %s1 : !torch.vtensor<[4,16],f32>
  }
  return %0 : !torch.vtensor<[4,16],f32>
}
}

// -----

module {
func.func @forward(%x: !torch.vtensor<[2,4,16],f32>) -> !torch.vtensor<[2,4,16],f32> {
  // Attention, split by heads: q, k and v column-parallel, the output
  // projection row-parallel, 4 heads of 4 become 2 per rank.
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int16 = torch.constant.int 16
  %intm1 = torch.constant.int -1
  %intm2 = torch.constant.int -2
  %none = torch.constant.none
  %wq = pippy.param "attn.q.weight" : !torch.vtensor<[16,16],f32>
  %bq = pippy.param "attn.q.bias" : !torch.vtensor<[16],f32>
  %q = torch.aten.linear %x, %wq, %bq : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[2,4,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int4, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %q, %lq : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,4,4],f32>
  %qt = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,4,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,4,4],f32>
  %wk = pippy.param "attn.k.weight" : !torch.vtensor<[16,16],f32>
  %k = torch.aten.linear %x, %wk, %none : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[2,4,16],f32>
  %lk = torch.prim.ListConstruct %int2, %int4, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %k4 = torch.aten.view %k, %lk : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,4,4],f32>
  %kt = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,4,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,4,4],f32>
  %wv = pippy.param "attn.v.weight" : !torch.vtensor<[16,16],f32>
  %v = torch.aten.linear %x, %wv, %none : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[2,4,16],f32>
  %lv = torch.prim.ListConstruct %int2, %int4, %int4, %intm1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %v4 = torch.aten.view %v, %lv : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,4,4],f32>
  %vt = torch.aten.transpose.int %v4, %int1, %int2 : !torch.vtensor<[2,4,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,4,4],f32>
  %ktt = torch.aten.transpose.int %kt, %intm2, %intm1 : !torch.vtensor<[2,4,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,4,4],f32>
  %s = torch.aten.matmul %qt, %ktt : !torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[2,4,4,4],f32> -> !torch.vtensor<[2,4,4,4],f32>
  %scale = torch.vtensor.literal(dense<5.000000e-01> : tensor<f64>) : !torch.vtensor<[],f64>
  %ss = torch.aten.mul.Tensor %s, %scale : !torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[],f64> -> !torch.vtensor<[2,4,4,4],f32>
  %mask = pippy.param "attn.mask" : !torch.vtensor<[1,1,4,4],f32>
  %m = torch.aten.eq.Scalar %mask, %int0 : !torch.vtensor<[1,1,4,4],f32>, !torch.int -> !torch.vtensor<[1,1,4,4],i1>
  %inf = torch.constant.float 0xFFF0000000000000
  %mf = torch.aten.masked_fill.Scalar %ss, %m, %inf : !torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[1,1,4,4],i1>, !torch.float -> !torch.vtensor<[2,4,4,4],f32>
  %p = torch.aten.softmax.int %mf, %intm1, %none : !torch.vtensor<[2,4,4,4],f32>, !torch.int, !torch.none -> !torch.vtensor<[2,4,4,4],f32>
  %o = torch.aten.matmul %p, %vt : !torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[2,4,4,4],f32> -> !torch.vtensor<[2,4,4,4],f32>
  %ot = torch.aten.transpose.int %o, %int1, %int2 : !torch.vtensor<[2,4,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,4,4],f32>
  %oc = torch.aten.contiguous %ot, %int0 : !torch.vtensor<[2,4,4,4],f32>, !torch.int -> !torch.vtensor<[2,4,4,4],f32>
  %lo = torch.prim.ListConstruct %int2, %int4, %int16 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %o3 = torch.aten.view %oc, %lo : !torch.vtensor<[2,4,4,4],f32>, !torch.list<int> -> !torch.vtensor<[2,4,16],f32>
  %wo = pippy.param "attn.proj.weight" : !torch.vtensor<[16,16],f32>
  %bo = pippy.param "attn.proj.bias" : !torch.vtensor<[16],f32>
  %y = torch.aten.linear %o3, %wo, %bo : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[2,4,16],f32>
  %int1b = torch.constant.int 1
  %r = torch.aten.add.Tensor %x, %y, %int1b : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[2,4,16],f32>, !torch.int -> !torch.vtensor<[2,4,16],f32>
  return %r : !torch.vtensor<[2,4,16],f32>
}
}

// -----

// CHECK-LABEL: func.func @forward(%arg0: !torch.vtensor<[2,4],si64>)
// CHECK:      %[[W:.*]] = pippy.param "wpe.weight" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[4,16],f32>
// CHECK:      %[[E:.*]] = pippy.tp_embedding %[[W]], %arg0 {pippy.tensor_parallel = "vocabulary", tp = 2 : i64} : !torch.vtensor<[4,16],f32>, !torch.vtensor<[2,4],si64> -> !torch.vtensor<[2,4,16],f32>
// CHECK-NEXT: %[[S:.*]] = pippy.tp_reduce %[[E]] {tp = 2 : i64} : !torch.vtensor<[2,4,16],f32>
// CHECK:      torch.aten.embedding {{.*}} {pippy.tensor_parallel = "replicated: a padding index, scaling by frequency or sparse gradients"}
// CHECK:      torch.aten.add.Tensor %[[S]]
// THREE:      torch.aten.embedding {{.*}} {pippy.tensor_parallel = "replicated: 8 rows do not divide by tp 3"}
module {
func.func @forward(%idx: !torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4,16],f32> {
  %w = pippy.param "wpe.weight" : !torch.vtensor<[8,16],f32>
  %intm1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %e = torch.aten.embedding %w, %idx, %intm1, %false, %false : !torch.vtensor<[8,16],f32>, !torch.vtensor<[2,4],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,4,16],f32>
  %p = pippy.param "padded.weight" : !torch.vtensor<[8,16],f32>
  %f = torch.aten.embedding %p, %idx, %int0, %false, %false : !torch.vtensor<[8,16],f32>, !torch.vtensor<[2,4],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,4,16],f32>
  %s = torch.aten.add.Tensor %e, %f, %int1 : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[2,4,16],f32>, !torch.int -> !torch.vtensor<[2,4,16],f32>
  return %s : !torch.vtensor<[2,4,16],f32>
}
}
