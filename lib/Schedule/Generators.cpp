//===- Generators.cpp - the built-in schedule kinds -----------------------===//
//
// Each kind first lists every rank's compute actions (F, B, I, W) in order;
// addCommunication then adds the sends and receives, the tied all-reduces
// and the optimizer steps. The orders are those of torch.distributed.
// pipelining (PyTorch 2.11, schedules.py) for the same ranks, stages and
// micro-batches, with its idle slots dropped; test/Unit/ScheduleKindsTest
// compares them with the upstream algorithms' output.
//
// The timelines below are the simulator's (renderTimeline) with unit costs,
// F = B = 1, or F = I = W = 1 for the kinds that split the backward; `.` is
// idle. Stage s of the interleaved kinds is on rank s mod R; zbv's rank r
// holds stages r and 2R-1-r.
//
//===----------------------------------------------------------------------===//

#include "pippy/Schedule/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <deque>
#include <map>

using namespace pippy::schedule;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// What every generator reads.
struct Shape {
  int R; ///< ranks
  int S; ///< stages
  int M; ///< micro-batches
  int L; ///< stages per rank
  bool splitBackward;
  const Topology *topo;
};

/// Hands out each stage's micro-batches in order, per kind of action.
class Counters {
public:
  Action next(Op op, int stage) { return {op, stage, count[{op, stage}]++}; }

private:
  std::map<std::pair<Op, int>, int> count;
};

/// GPipe (Huang et al., 2019, arXiv:1811.06965): every forward, then every
/// backward.
///
///   3 ranks, 3 stages, 4 micro-batches (bubble 0.333):
///   rank0 0F0 0F1 0F2 0F3 .   .   .   .   0B0 0B1 0B2 0B3
///   rank1 .   1F0 1F1 1F2 1F3 .   .   1B0 1B1 1B2 1B3 .
///   rank2 .   .   2F0 2F1 2F2 2F3 2B0 2B1 2B2 2B3 .   .
std::vector<Action> gpipe(const Shape &shape, int r) {
  std::vector<Action> list;
  for (int m = 0; m < shape.M; ++m)
    list.push_back({Op::Forward, r, m});
  for (int m = 0; m < shape.M; ++m)
    list.push_back({Op::Backward, r, m});
  return list;
}

/// 1F1B (PipeDream-Flush, Narayanan et al., 2021, arXiv:2006.09503): rank r
/// runs S-1-r forwards ahead, then alternates one forward and one backward,
/// so it holds at most S-r micro-batches.
///
///   3 ranks, 3 stages, 4 micro-batches (bubble 0.333):
///   rank0 0F0 0F1 0F2 .   .   0B0 0F3 0B1 .   0B2 .   0B3
///   rank1 .   1F0 1F1 .   1B0 1F2 1B1 1F3 1B2 .   1B3 .
///   rank2 .   .   2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3 .   .
std::vector<Action> oneFOneB(const Shape &shape, int r) {
  std::vector<Action> list;
  int f = 0, b = 0, M = shape.M;
  for (int warmup = std::min(shape.S - 1 - r, M); f < warmup;)
    list.push_back({Op::Forward, r, f++});
  while (f < M) {
    list.push_back({Op::Forward, r, f++});
    list.push_back({Op::Backward, r, b++});
  }
  while (b < M) {
    // A split backward's first stage waits longest for the last
    // micro-batch's gradient (every other stage's backward comes first):
    // it computes the weight gradients of the others meanwhile.
    bool first =
        shape.topo->producers[r].empty() && !shape.topo->consumers(r).empty();
    if (shape.splitBackward && first && M > 1 && b == M - 1)
      list.push_back({Op::Weight, r, 0});
    list.push_back({Op::Backward, r, b++});
  }
  return list;
}

/// The rounds of the interleaved kinds: micro-batches go through a rank's
/// stages in groups of `perRound` (R, or M when M < R).
llvm::Expected<int> microbatchesPerRound(const Shape &shape,
                                         llvm::StringRef kind) {
  int rounds = std::max(1, shape.M / shape.R);
  if (shape.M % rounds != 0)
    return error(kind + " needs the micro-batches (" + llvm::Twine(shape.M) +
                 ") to be a multiple of the rounds, max(1, M / ranks) = " +
                 llvm::Twine(rounds));
  return shape.M / rounds;
}

/// Interleaved 1F1B (Narayanan et al., 2021, arXiv:2104.04473), depth
/// first, and with `zeroBubble` the interleaved zero-bubble ZB1P (Qi et
/// al., 2024, arXiv:2401.10241): rank r holds stages r, r+R, ...; a round
/// of micro-batches runs through one local stage before the next; the
/// warm-up is (L-1) rounds plus 2 (ZB1P: 1) forwards per rank after r.
/// ZB1P splits each backward into I and W and starts r 1F1B steps late on
/// its W, which then fill the bubble. With one stage per rank ZB1P is zb-h1.
///
///   interleaved-1f1b, 2 ranks, 4 stages, 2 micro-batches (bubble 0.200):
///   rank0 0F0 0F1 2F0 2F1 .   2B0 .   2B1 0B0 0B1
///   rank1 .   1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1 .
///
///   zb1p, 2 ranks, 4 stages, 2 micro-batches (bubble 0.077):
///   rank0 0F0 0F1 2F0 2F1 .   2I0 2W0 2I1 2W1 0I0 0W0 0I1 0W1
///   rank1 .   1F0 1F1 3F0 3I0 3F1 3I1 3W0 1I0 3W1 1I1 1W0 1W1
///
///   zb-h1, 3 ranks, 3 stages, 4 micro-batches (bubble 0.143):
///   rank0 0F0 0F1 0F2 .   .   0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3
///   rank1 .   1F0 1F1 .   1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3
///   rank2 .   .   2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3
std::vector<Action> interleaved(const Shape &shape, int r, int perRound,
                                bool zeroBubble) {
  int L = shape.L, R = shape.R;
  int warmup = std::min((L - 1) * perRound + (zeroBubble ? 1 : 2) * (R - 1 - r),
                        shape.M * L);
  int steady = shape.M * L - warmup;
  auto forwardStage = [&](int op) { return (op / perRound) % L * R + r; };
  auto backwardStage = [&](int op) {
    return (L - 1 - (op - warmup) / perRound % L) * R + r;
  };
  Op backward = zeroBubble ? Op::BackwardInput : Op::Backward;
  int delay = r; // ZB1P: 1F1B steps before rank r's first W
  Counters counters;
  std::vector<Action> list;
  std::vector<int> backwardOps;
  size_t weightsDone = 0;
  auto weight = [&] {
    list.push_back(counters.next(Op::BackwardWeight,
                                 backwardStage(backwardOps[weightsDone++])));
  };
  for (int op = 0; op < shape.M * L + warmup; ++op) {
    if (op < warmup + steady)
      list.push_back(counters.next(Op::Forward, forwardStage(op)));
    if (op < warmup)
      continue;
    list.push_back(counters.next(backward, backwardStage(op)));
    backwardOps.push_back(op);
    if (zeroBubble && op - warmup >= delay)
      weight();
  }
  while (zeroBubble && weightsDone < backwardOps.size())
    weight();
  return list;
}

/// Looped BFS (Lamy-Poirier, 2023, arXiv:2211.05953): rank r holds stages
/// r, r+R, ...; each local stage forwards every micro-batch before the
/// next, and the backwards run in reverse, last stage and last micro-batch
/// first.
///
///   2 ranks, 4 stages, 2 micro-batches (bubble 0.200):
///   rank0 0F0 0F1 2F0 2F1 .   .   2B1 2B0 0B1 0B0
///   rank1 .   1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0 .
std::vector<Action> loopedBfs(const Shape &shape, int r) {
  std::vector<Action> list;
  for (int l = 0; l < shape.L; ++l)
    for (int m = 0; m < shape.M; ++m)
      list.push_back({Op::Forward, l * shape.R + r, m});
  for (int l = shape.L - 1; l >= 0; --l)
    for (int m = shape.M - 1; m >= 0; --m)
      list.push_back({Op::Backward, l * shape.R + r, m});
  return list;
}

/// ZB-V (Qi et al., 2024, arXiv:2401.10241, section 6): rank r holds stages
/// r and 2R-1-r, so the first and the last stage share rank 0 and the
/// micro-batches go down the ranks and back up in a V. After a warm-up of
/// 2(R-r)-1 forwards of the first chunk, then r pairs of both chunks'
/// forwards, each step runs F, I, W of one chunk and then of the other;
/// the cool-down's W fill the gaps. Zero bubble when F, I and W cost the
/// same. Upstream pads M to 2R-1 and drops the padding's actions.
///
///   2 ranks, 4 stages, 2 micro-batches (bubble 0.143):
///   rank0 0F0 0F1 .   3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 .   0I1 0W1
///   rank1 .   1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1 .
std::vector<Action> zbv(const Shape &shape, int r) {
  int R = shape.R, M = std::max(2 * R - 1, shape.M);
  int c0 = r, c1 = 2 * R - 1 - r;
  Counters counters;
  std::vector<Action> list;
  auto add = [&](Op op, int stage) {
    list.push_back(counters.next(op, stage));
  };
  int f0 = 0, f1 = 0;
  for (int i = 0; i < 2 * (R - r) - 1; ++i, ++f0)
    add(Op::Forward, c0);
  for (int i = 0; i < r; ++i, ++f0, ++f1) {
    add(Op::Forward, c1);
    add(Op::Forward, c0);
  }
  for (int i = 0; i < R - r; ++i, ++f1) {
    add(Op::Forward, c1);
    add(Op::BackwardInput, c1);
    add(Op::BackwardWeight, c1);
  }
  while (f1 < f0 || f0 < M) {
    if (f0 < M) {
      add(Op::Forward, c0);
      ++f0;
    }
    add(Op::BackwardInput, c0);
    add(Op::BackwardWeight, c0);
    add(Op::Forward, c1);
    ++f1;
    add(Op::BackwardInput, c1);
    add(Op::BackwardWeight, c1);
  }
  for (int i = 0; i < r; ++i) {
    add(Op::BackwardInput, c0);
    add(Op::BackwardInput, c1);
  }
  for (int i = 0; i < R - r; ++i) {
    add(Op::BackwardInput, c0);
    add(Op::BackwardWeight, c0);
  }
  int i0 = 0, i1 = 0, w0 = 0, w1 = 0;
  for (const Action &a : list) {
    if (a.op == Op::BackwardInput)
      ++(a.stage == c0 ? i0 : i1);
    if (a.op == Op::BackwardWeight)
      ++(a.stage == c0 ? w0 : w1);
  }
  for (; w1 < i1; ++w1)
    add(Op::BackwardWeight, c1);
  for (; w0 < i0; ++w0)
    add(Op::BackwardWeight, c0);
  llvm::erase_if(list,
                 [&](const Action &a) { return a.microbatch >= shape.M; });
  return list;
}

/// DualPipeV (DeepSeek-AI, 2024, arXiv:2412.19437; upstream's
/// ScheduleDualPipeV after deepseek-ai/DualPipe): the V placement of zbv,
/// with a forward of one chunk paired with a whole backward of the other in
/// the steady state (upstream overlaps each pair; here they run one after
/// the other), and input/weight splits only where they fill the warm-up
/// and the cool-down. Needs at least as many micro-batches as stages.
///
std::vector<Action> dualPipeV(const Shape &shape, int r) {
  int R = shape.R, M = shape.M, s0 = r, s1 = 2 * R - 1 - r;
  std::map<int, int> forwards, backwards;  // next micro-batch, per stage
  std::deque<std::pair<int, int>> weights; // (stage, micro-batch) I left
  std::vector<Action> list;
  auto forward = [&](int s) {
    list.push_back({Op::Forward, s, forwards[s]++});
  };
  auto backward = [&](int s, bool split) {
    int m = backwards[s]++;
    list.push_back({split ? Op::BackwardInput : Op::Backward, s, m});
    if (split)
      weights.push_back({s, m});
  };
  auto weight = [&] {
    if (weights.empty())
      return;
    list.push_back(
        {Op::BackwardWeight, weights.front().first, weights.front().second});
    weights.pop_front();
  };
  for (int i = 0; i < 2 * (R - r - 1); ++i)
    forward(s0);
  for (int i = 0; i < r + 1; ++i) {
    forward(s0);
    forward(s1);
  }
  for (int i = 0; i < R - r - 1; ++i) {
    backward(s1, true);
    weight();
    forward(s1);
  }
  for (int i = 0; i < M - 2 * R + r + 1; ++i) {
    forward(s0);
    backward(s1, false);
    forward(s1);
    backward(s0, false);
  }
  for (int i = 0; i < R - r - 1; ++i) {
    backward(s1, false);
    forward(s1);
    backward(s0, false);
  }
  bool split = false;
  for (int i = 0; i < r + 1; ++i) {
    split |= i == (r + 1) / 2 && r % 2 == 1;
    backward(s1, split);
    split |= i == (r + 1) / 2 && r % 2 == 0;
    backward(s0, split);
  }
  for (int i = 0; i < R - r - 1; ++i) {
    weight();
    backward(s0, split);
  }
  for (int i = 0; i < r + 1; ++i)
    weight();
  return list;
}

/// Forward only: each held stage forwards every micro-batch, in stage
/// order (any kind gives this).
std::vector<Action> forwardOnly(const Schedule &schedule, int r) {
  std::vector<Action> list;
  for (int s : schedule.stagesOf(r))
    for (int m = 0; m < schedule.microbatches; ++m)
      list.push_back({Op::Forward, s, m});
  return list;
}

/// Whether `kind`'s placement puts `S` stages on `R` ranks.
bool fits(Kind kind, int S, int R) {
  llvm::Expected<std::vector<int>> p = place(placementOf(kind), S, R);
  if (p)
    return true;
  llvm::consumeError(p.takeError());
  return false;
}

/// The kinds whose placement fits `S` stages on `R` ranks.
std::string kindsThatFit(int S, int R) {
  std::vector<std::string> names;
  for (Kind k : kinds())
    if (fits(k, S, R))
      names.push_back(kindName(k));
  return llvm::join(names, ", ");
}

/// Where `kind` could run `S` stages instead: " (run it on 2 ranks: --nproc
/// 2)", " (run it on 1, 2 or 4 ranks)", or "" where no rank count fits.
std::string ranksThatFit(Kind kind, int S) {
  std::vector<std::string> counts;
  for (int R = 1; R <= S; ++R)
    if (fits(kind, S, R))
      counts.push_back(std::to_string(R));
  if (counts.empty())
    return "";
  if (counts.size() == 1)
    return " (run it on " + counts[0] + " ranks: --nproc " + counts[0] + ")";
  std::string last = counts.back();
  counts.pop_back();
  return " (run it on " + llvm::join(counts, ", ") + " or " + last + " ranks)";
}

} // namespace

llvm::Expected<Schedule>
pippy::schedule::generate(Kind kind, const Topology &topo, int numRanks,
                          int microbatches, bool training, bool splitBackward) {
  if (!llvm::is_contained(kinds(), kind))
    return error("pippy has no generator for the " + kindName(kind) +
                 " schedule");
  if (microbatches < 1)
    return error("a schedule needs at least one micro-batch");
  int S = topo.numStages, R = numRanks;
  llvm::Expected<std::vector<int>> stageRank = place(placementOf(kind), S, R);
  if (!stageRank) {
    std::string fit = kindsThatFit(S, R);
    return error(
        kindName(kind) + ": " + llvm::toString(stageRank.takeError()) +
        ranksThatFit(kind, S) +
        (fit.empty() ? ""
                     : "; kinds that fit " + placementText(S, R) + ": " + fit));
  }
  Schedule schedule;
  schedule.kind = kind;
  schedule.microbatches = microbatches;
  schedule.training = training;
  schedule.stageRank = std::move(*stageRank);
  Shape shape{R, S, microbatches, S / R, splitBackward, &topo};
  if (training && kind == Kind::DualPipeV && microbatches < S)
    return error("dualpipev needs at least as many micro-batches as stages (" +
                 llvm::Twine(S) + "); got " + llvm::Twine(microbatches));
  std::optional<int> perRound;
  if (training && (kind == Kind::Interleaved1F1B || kind == Kind::ZB1P)) {
    llvm::Expected<int> n = microbatchesPerRound(shape, kindName(kind));
    if (!n)
      return n.takeError();
    perRound = *n;
  }
  for (int r = 0; r < R; ++r) {
    std::vector<Action> list;
    if (!training)
      list = forwardOnly(schedule, r);
    else if (kind == Kind::GPipe)
      list = gpipe(shape, r);
    else if (kind == Kind::OneFOneB)
      list = oneFOneB(shape, r);
    else if (kind == Kind::Interleaved1F1B || kind == Kind::ZB1P)
      list = interleaved(shape, r, *perRound, kind == Kind::ZB1P);
    else if (kind == Kind::ZBH1)
      list = interleaved(shape, r, microbatches, /*zeroBubble=*/true);
    else if (kind == Kind::LoopedBFS)
      list = loopedBfs(shape, r);
    else if (kind == Kind::ZBV)
      list = zbv(shape, r);
    else
      list = dualPipeV(shape, r);
    schedule.ranks.push_back(std::move(list));
  }
  addCommunication(schedule, topo);
  return schedule;
}
