//===- Passes.td - pippy compiler passes ------------------*- tablegen -*-===//
//
// Every pass argument starts with `pippy-`. Each pass has a file of its own
// in this folder and a lit test named after its argument in test/Passes/.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_PASSES_TD
#define PIPPY_PASSES_TD

include "mlir/Pass/PassBase.td"

def PippyLiftParams : Pass<"pippy-lift-params", "::mlir::ModuleOp"> {
  let summary = "Turns Torch-MLIR's weight literals into named parameters";
  let description = [{
    Torch-MLIR output carries a model's weights inline, as
    `torch.vtensor.literal(dense<...>)` or `dense_resource<...>` constants.
    This pass makes them parameters of the graph IR:

    - every floating-point literal with more than one element becomes a
      `pippy.param`, and its value is written to the safetensors file
      `weights`, which the module's `pippy.weights` attribute then names;
    - integer and single-element literals stay constants;
    - `torch.operator "torch.pippy._pipe_split"` (a user's `pipe_split()`)
      becomes `pippy.split_point`.
    - each random op (`dropout`, `bernoulli`, `uniform`, `rand_like`, ...)
      gets `pippy.random_stream`, numbered in op order, so that its numbers
      under `pippy-run --seed` do not depend on how the graph is split.

    A `dense_resource` literal keeps its resource key as the parameter name,
    so every literal of one resource becomes one (tied) parameter. A `dense`
    literal is named `<function>.literal<N>`, counting the function's lifted
    literals in op order. A `dense_resource` whose bytes are missing from the
    file is an error that names it.

    Torch-MLIR's frozen output does not say which literals were buffers. A
    lifted literal that is only read as the running mean or variance of a
    batch norm (`batch_norm`, `native_batch_norm`,
    `_native_batch_norm_legit[_no_training]`, `instance_norm`) is listed as a
    buffer in the weights file's metadata, so `pippy-run` never trains it;
    `buffers=NAME,...` lists more (a causal mask, rotary tables). A name in
    `buffers` that no lifted literal has is an error.

    The graph IR's function is `@forward`. Torch-MLIR's FX importer names
    it `@main`: a module without `@forward` whose only public function has
    a body gets that function renamed to `forward`.

    Before:

    ```mlir
    %w = torch.vtensor.literal(dense_resource<fc_weight> : tensor<4x3xf32>) : !torch.vtensor<[4,3],f32>
    %y = torch.aten.mm %x, %w : ...
    torch.operator "torch.pippy._pipe_split"() : () -> ()
    ```

    After `--pippy-lift-params="weights=w.safetensors"`:

    ```mlir
    module attributes {pippy.weights = "w.safetensors"} {
      ...
      %w = pippy.param "fc_weight" : !torch.vtensor<[4,3],f32>
      %y = torch.aten.mm %x, %w : ...
      pippy.split_point
    ```
  }];
  let options = [
    Option<"weights", "weights", "std::string", /*default=*/"\"\"",
           "safetensors file that receives the lifted values">,
    ListOption<"buffers", "buffers", "std::string",
               "lifted literals (by parameter name) that are buffers, never "
               "trained">,
  ];
  let dependentDialects = ["::mlir::pippy::PippyDialect"];
}

def PippyAnnotateSplitPoints
    : Pass<"pippy-annotate-split-points", "::mlir::func::FuncOp"> {
  let summary = "Places split points by module path";
  let description = [{
    Inserts `pippy.split_point` markers into the graph IR at module
    boundaries, with the semantics of PyTorch's `SplitPoint.BEGINNING` and
    `SplitPoint.END`: `layers.4:begin` cuts before the first op of module
    `layers.4` (or of any module inside it), `layers.8:end` cuts after its last
    op. Module paths come from the ops' `NameLoc`s, as the importer writes
    them. Parameters and constants do not count as ops of a module: outlining
    copies them into whichever stages use them.

    A path that matches no op is an error naming the point. A module called
    several times (one module's weights used at several depths) has its ops
    in several runs; its `:begin` cuts before the first run and its `:end`
    after the last, with a warning (PyTorch's hooks would cut at every
    call): name the modules around the other calls to cut there too.

    Before `--pippy-annotate-split-points="points=fc2:begin"`:

    ```mlir
    %0 = torch.aten.linear %x, %w1, %b1 : ... loc("fc1")
    %1 = torch.aten.linear %0, %w2, %b2 : ... loc("fc2")
    ```

    After:

    ```mlir
    %0 = torch.aten.linear %x, %w1, %b1 : ... loc("fc1")
    pippy.split_point
    %1 = torch.aten.linear %0, %w2, %b2 : ... loc("fc2")
    ```
  }];
  let options = [
    ListOption<"points", "points", "std::string",
               "split points, each `<module path>:begin` or `<module path>:end`">,
  ];
  let dependentDialects = ["::mlir::pippy::PippyDialect"];
}

def PippyOutlineStages : Pass<"pippy-outline-stages", "::mlir::func::FuncOp"> {
  let summary = "Outlines the graph IR between split points into pipeline stages";
  let description = [{
    Turns a function of the graph IR whose body holds `pippy.split_point`
    markers into one `pippy.pipeline` of `pippy.stage` regions: the ops
    between two markers become one stage, in op order. Every value used by a
    later stage becomes a result of its stage and an operand of each stage
    that uses it, so a skip connection is an operand from a non-adjacent
    stage. Parameters and constants are copied into each stage that uses
    them; a parameter used by several stages gets a tied group listing exactly
    those stages (each keeps a copy whose gradients are summed). Parameter
    ops of one name (a Torch-MLIR resource read by several literals) share
    one copy per stage. Every result of the pipeline comes from the last
    stage: a function result made earlier is sent to the last stage, as a
    skip connection, and yielded from there.

    Only tensors cross stages; a non-tensor value (other than a constant)
    used by a later stage is an error naming it. A marker that would leave a
    stage empty is an error naming the marker. A function without markers
    stays a graph IR, unless `single-stage` asks for a one-stage pipeline
    (what `--pippy-split="stages=1"` does).

    Before:

    ```mlir
    func.func @forward(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
      %0 = torch.aten.relu %x : ...
      pippy.split_point
      %1 = torch.aten.tanh %0 : ...
      return %1 : ...
    }
    ```

    After:

    ```mlir
    func.func @forward(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
      %0 = pippy.pipeline -> !torch.vtensor<[4,8],f32> {
        %1 = pippy.stage 0 (%x) : (...) -> ... {
        ^bb0(%a: ...):
          %r = torch.aten.relu %a : ...
          pippy.yield %r : ...
        }
        %2 = pippy.stage 1 (%1) : (...) -> ... {
        ^bb0(%a: ...):
          %t = torch.aten.tanh %a : ...
          pippy.yield %t : ...
        }
        pippy.yield %2 : ...
      }
      return %0 : ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::pippy::PippyDialect"];
  let options = [
    Option<"singleStage", "single-stage", "bool", /*default=*/"false",
           "outline a function without split points as one stage">,
  ];
}

def PippyPlaceSplitPoints
    : Pass<"pippy-place-split-points", "::mlir::func::FuncOp"> {
  let summary = "Chooses split points automatically";
  let description = [{
    Places `stages - 1` `pippy.split_point` markers in a graph IR that has
    none, by one of three policies:

    - `balanced` (default): an optimal contiguous partition of the op order
      minimising the slowest stage, where a stage costs its ops' FLOPs plus
      the bytes they move (lib/Analysis/CostModel.h) plus the bytes of the
      tensors it receives and sends;
    - `params`: equal parameter bytes per stage, counting each parameter at
      its first use (DeepSpeed's `partition_method="parameters"`);
    - `uniform`: equal op counts.

    Parameters and constants are not counted as ops. A function that already
    has markers is left alone, so hand-placed markers win.

    `mem-cap=BYTES` keeps every stage's parameter bytes (each parameter at
    its first use) plus activation bytes (its ops' results, one micro-batch)
    at or under the cap, still optimally; a cap no split can meet is an
    error.

    `profile=FILE` replaces the cost model with measured times, as
    `pippy-run --profile FILE` writes them (JSON):

    ```json
    {"format": "pippy-profile", "version": 1, "transfer_ns_per_byte": 1.0,
     "ops": [{"index": 0, "op": "torch.aten.linear",
              "forward_us": 41.5, "backward_us": 80.2}, ...]}
    ```

    `index` counts the ops this pass counts (not parameters or constants),
    in op order; a pipeline's stages list them in the same order. An op
    costs `forward_us + backward_us` (in ns, rounded) and a cut the bytes
    crossing it times `transfer_ns_per_byte` (default 1). A profile whose op
    count or op names differ from the function's is an error naming the
    first difference.

    `--pippy-place-split-points="stages=2"` on three equal layers puts the
    marker after the second; `--pippy-split` runs this pass and then
    `--pippy-outline-stages` (as `--pippy-split-stages`).
  }];
  let options = [
    Option<"stages", "stages", "unsigned", /*default=*/"0",
           "number of pipeline stages">,
    Option<"policy", "policy", "std::string", /*default=*/"\"balanced\"",
           "balanced, params or uniform">,
    Option<"memCap", "mem-cap", "int64_t", /*default=*/"0",
           "most parameter + activation bytes per stage (0: no cap)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "measured per-op times (pippy-run --profile) instead of the "
           "cost model">,
  ];
  let dependentDialects = ["::mlir::pippy::PippyDialect"];
}

def PippySplitStages : Pass<"pippy-split-stages", "::mlir::func::FuncOp"> {
  let summary = "Places split points and outlines the stages, in one pass";
  let description = [{
    Runs `--pippy-place-split-points` with the same options and then
    `--pippy-outline-stages` (with `single-stage` when `stages=1`) on each
    function, and fails as either would. It is what `--pippy-split` runs
    first. The pass manager verifies a function after each pass that
    changed it; as one pass, the two steps cost one verification instead of
    two (the one saved is about 6% of a `--pippy-split` run on the 102k-op
    model of bench/compile).
    Run the two passes on their own to see the markers in between.

    `--pippy-split-stages="stages=2"` on three equal layers gives the same
    pipeline as `--pippy-place-split-points="stages=2"
    --pippy-outline-stages`.
  }];
  let options = [
    Option<"stages", "stages", "unsigned", /*default=*/"0",
           "number of pipeline stages">,
    Option<"policy", "policy", "std::string", /*default=*/"\"balanced\"",
           "balanced, params or uniform">,
    Option<"memCap", "mem-cap", "int64_t", /*default=*/"0",
           "most parameter + activation bytes per stage (0: no cap)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "measured per-op times (pippy-run --profile) instead of the "
           "cost model">,
  ];
  let dependentDialects = ["::mlir::pippy::PippyDialect"];
}

def PippyResolveSkips : Pass<"pippy-resolve-skips", "::mlir::func::FuncOp"> {
  let summary = "Chooses how skip connections travel between stages";
  let description = [{
    A skip connection is a stage operand produced by a stage that is not the
    previous one. `mode=direct` (default) leaves it: the producer sends it
    straight to its consumer. `mode=relay` routes it through every stage in
    between, each of which takes it as an extra operand and yields it
    unchanged, so every transfer is between neighbours (what a ring of
    point-to-point links, or a runtime that only talks to neighbours, needs).
    A value relayed to several consumers passes each stage once.

    Before (`%s0#1` skips stage 1):

    ```mlir
    %s0:2 = pippy.stage 0 (...) ...
    %s1 = pippy.stage 1 (%s0#0) ...
    %s2 = pippy.stage 2 (%s1, %s0#1) ...
    ```

    After `--pippy-resolve-skips="mode=relay"`:

    ```mlir
    %s0:2 = pippy.stage 0 (...) ...
    %s1:2 = pippy.stage 1 (%s0#0, %s0#1) ... // yields its last argument too
    %s2 = pippy.stage 2 (%s1#0, %s1#1) ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"direct\"",
           "direct or relay">,
  ];
}

def PippyResolveTied : Pass<"pippy-resolve-tied", "::mlir::func::FuncOp"> {
  let summary = "Chooses how tied weights reach the stages that share them";
  let description = [{
    Outlining gives every stage that uses a parameter its own
    `pippy.param`, and the pipeline a tied group listing those stages.
    `mode=replicate` (default) keeps that: each stage holds a copy, the
    runtime makes the copies equal at the start and sums their gradients
    before every optimizer step. `mode=transmit` keeps the weight only in
    the first stage of its group, which yields it as one more result; every
    other stage of the group takes it as one more operand instead of its
    `pippy.param`, so the weight travels forward like an activation and its
    gradient comes back like one. The tied group is then gone.

    Before (`wte.weight` tied between stages 0 and 1):

    ```mlir
    %0 = pippy.pipeline tied [#pippy.tied_group<"wte.weight", stages = [0, 1]>] -> ... {
      %s0 = pippy.stage 0 (%x) ... {
        %w = pippy.param "wte.weight" : ...
        ...
        pippy.yield %h : ...
      }
      %s1 = pippy.stage 1 (%s0) ... {
      ^bb0(%h: ...):
        %w = pippy.param "wte.weight" : ...
        ...
      }
    }
    ```

    After `--pippy-resolve-tied="mode=transmit"`:

    ```mlir
    %0 = pippy.pipeline -> ... {
      %s0:2 = pippy.stage 0 (%x) ... {
        %w = pippy.param "wte.weight" : ...
        ...
        pippy.yield %h, %w : ...
      }
      %s1 = pippy.stage 1 (%s0#0, %s0#1) ... {
      ^bb0(%h: ..., %w: ...):
        ...
      }
    }
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"replicate\"",
           "replicate or transmit">,
  ];
}

def PippyTensorParallel
    : Pass<"pippy-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Shards MLPs, attention and embeddings over a tensor-parallel group";
  let description = [{
    Megatron-LM's tensor parallelism: the linear layers that produce a
    row-parallel linear's input through ops a split can pass (an MLP's
    `linear -> gelu -> linear`, or attention's q, k, v -> heads -> scores ->
    softmax -> values -> output projection) are split over `tp` ranks by
    output features (column-parallel; attention by heads), the last by
    input features (row-parallel), with `pippy.tp_copy` before the first
    (identity; gradient summed over the group) and `pippy.tp_reduce` after
    the last (partial results summed); embeddings are split by vocabulary
    (`pippy.tp_embedding`, then `pippy.tp_reduce`). The sharded parameters
    carry `pippy.shard = array<i64: DIM, PARTS>` and their slice's type;
    the row-parallel bias is added once, after the sum. Everything else
    stays replicated. Each linear and embedding is marked
    `pippy.tensor_parallel` ("column", "row", "vocabulary", or
    "replicated: why"), and `--pippy-report` lists them. Run the result with
    `pippy-run --tp TP` (docs/TensorParallel.md). Works on graph IR and on
    pipelines alike (each stage on its own).

    ```mlir
    %h = torch.aten.linear %x, %w1, %b1 ... -> !torch.vtensor<[2,8,128],f32>
    %g = torch.aten.gelu %h, %str ...
    %y = torch.aten.linear %g, %w2, %b2 ... -> !torch.vtensor<[2,8,32],f32>
    ```

    becomes, with `tp=2`:

    ```mlir
    %x1 = pippy.tp_copy %x {tp = 2} : !torch.vtensor<[2,8,32],f32>
    %h = torch.aten.linear %x1, %w1, %b1 ... -> !torch.vtensor<[2,8,64],f32>
    %g = torch.aten.gelu %h, %str ...
    %p = torch.aten.linear %g, %w2, %none ... -> !torch.vtensor<[2,8,32],f32>
    %r = pippy.tp_reduce %p {tp = 2} : !torch.vtensor<[2,8,32],f32>
    %y = torch.aten.add.Tensor %r, %b2, %int1 ...
    ```
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"2",
           "ranks in the tensor-parallel group">,
  ];
}

def PippyLowerSchedule
    : Pass<"pippy-lower-schedule", "::mlir::func::FuncOp"> {
  let summary = "Records each rank's checked action list on the pipeline";
  let description = [{
    Generates the schedule `schedule` for `microbatches` micro-batches on
    `ranks` ranks from the pipeline's stage graph (lib/Schedule), proves it
    complete and deadlock-free, and stores every rank's actions in their
    text form on the pipeline as `pippy.schedule`. The kinds are gpipe,
    1f1b and zb-h1 (one stage per rank), interleaved-1f1b, looped-bfs and
    zb1p (stage s on rank s mod ranks), and zbv (rank r holds stages r and
    2 ranks-1-r). `pippy-run` then runs exactly these actions and checks
    them again before the first step; `--microbatches` must match.

    ```mlir
    %0 = pippy.pipeline -> ... {
      ...
    } {pippy.schedule = {kind = "1f1b", microbatches = 2 : i64,
                         ranks = ["0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0STEP",
                                  "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1STEP"]}}
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, zb-h1, interleaved-1f1b, looped-bfs, zb1p or zbv">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"0",
           "ranks (0: one per stage, or one per two stages for zbv)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "micro-batches per step">,
  ];
}

def PippyEmitExecutables
    : Pass<"pippy-emit-executables", "::mlir::ModuleOp"> {
  let summary = "Writes one stage executable per rank";
  let description = [{
    Lowers the module's `forward` (a graph IR, or a pipeline IR) to stage
    executables (include/pippy/Executable/Executable.fbs) for a world of
    `ranks` ranks and writes them to `dir` as `rank0.pipx`, `rank1.pipx`,
    ...; the IR itself is left as it was. Each holds its rank's stage
    program (ATen operators by name and overload, arguments by schema name),
    the transfers it sends and receives, its checked schedule (the one
    `pippy.schedule` records, or `schedule` for `microbatches`
    micro-batches), the tied groups and the pipeline hash every rank's file
    shares. On one rank every stage of a pipeline becomes one program; on N
    ranks the pipeline needs N stages. The weights stay in the safetensors
    file the module names (or `weights`), recorded relative to `dir`.
    `pippy-run DIR` runs them; `pippy-opt --print-executable DIR` prints
    them as text.

    ```
    pippy-opt pipe.mlir --pippy-emit-executables="dir=exe ranks=2 schedule=1f1b microbatches=4" -o /dev/null
    ```
  }];
  let options = [
    Option<"dir", "dir", "std::string", /*default=*/"", "output folder">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "world size">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "a kind of --pippy-lower-schedule">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"0",
           "micro-batches per step (0: the lowered schedule's, or 1)">,
    Option<"deferWeightGrads", "defer-weight-grads", "bool",
           /*default=*/"false",
           "linear weight gradients wait for W or the step">,
    Option<"weights", "weights", "std::string", /*default=*/"",
           "weights file (default: the module's pippy.weights)">,
  ];
}

def PippySchedulePlot : Pass<"pippy-schedule-plot", "::mlir::ModuleOp"> {
  let summary = "Draws a pipeline's schedule as SVG";
  let description = [{
    Writes `file`, an SVG with one row per rank and one box per compute
    action (F, B, I, W, coloured by kind; idle time is the grey between
    them): the schedule the pipeline carries (`--pippy-lower-schedule`) as
    the simulator predicts it on the cost model (as `--pippy-report`), and,
    with `trace`, the same schedule as it ran, from a `pippy-run --trace`
    file, below it. The IR is not changed.

    ```
    pippy-opt pipe.mlir --pippy-lower-schedule="schedule=zbv ranks=2 microbatches=8" \
        --pippy-schedule-plot="file=zbv.svg trace=zbv.trace.json" -o /dev/null
    ```
  }];
  let options = [
    Option<"file", "file", "std::string", /*default=*/"", "the SVG to write">,
    Option<"trace", "trace", "std::string", /*default=*/"",
           "a pippy-run --trace of the schedule, drawn below">,
  ];
}

def PippyReport : Pass<"pippy-report", "::mlir::ModuleOp"> {
  let summary = "Prints a table of each pipeline's stages";
  let description = [{
    For every `pippy.pipeline`, prints one row per stage: ops (parameters and
    constants not counted), parameters and their bytes, FLOPs and bytes moved
    by the cost model (lib/Analysis/CostModel.h), activation bytes (results
    of its ops, per micro-batch), bytes received from and sent to other
    stages per micro-batch (model inputs and outputs not counted),
    and the predicted cost the balancer uses (FLOPs + bytes moved + bytes
    received + bytes sent); then the balance ratio, slowest stage over mean,
    and the optimum: the smallest bottleneck any contiguous split of the same
    ops into as many stages reaches under that objective (the balancer's
    partition, recomputed), so a hand-placed split shows how far it is from
    the best.
    A tied parameter counts in every stage that holds a copy. The IR is not
    changed. `format=json` prints the same as one JSON object per pipeline.

    When the pipeline carries a schedule (`--pippy-lower-schedule`), the
    report adds its simulation on these costs (a backward twice the
    forward, W's share one forward, transfers free): per rank its stages,
    busy share, the most micro-batches whose activations it holds at once
    and their bytes, and the bubble, 1 - busy / (ranks x makespan).
    `costs=FILE` simulates on measured costs instead, a JSON object with
    any of `forward`, `backward`, `weight` (lists, one time per stage per
    micro-batch), `message` (a rank's time per send or receive) and
    `transfer` (a message's flight time), in any one unit.

    ```
    $ pippy-opt pipe.mlir --pippy-report -o /dev/null
    stage  ops  params  param_bytes  flops  bytes_moved  activation_bytes  recv_bytes  send_bytes  predicted
    0      ...
    balance ratio (slowest / mean): 1.08
    bottleneck: 5210; optimum for 2 stages: 5210 (bottleneck / optimum: 1.000)
    ```
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "text or json">,
    Option<"costs", "costs", "std::string", /*default=*/"",
           "measured costs to simulate the schedule on (JSON)">,
  ];
}

#endif // PIPPY_PASSES_TD
