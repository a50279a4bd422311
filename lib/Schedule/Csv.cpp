//===- Csv.cpp - schedules in torch.distributed.pipelining's CSV form -----===//
//
// The form `_dump_csv` writes and `_load_csv` reads: row r is rank r's
// actions, one per cell, an empty cell an idle slot. The compute-only form
// lists F, I, B and W; the compute-and-communication form adds SEND_F,
// RECV_F, SEND_B and RECV_B. Upstream also has UNSHARD and RESHARD (FSDP),
// REDUCE_GRAD (data parallelism) and `(a;b)OVERLAP_F_B` (DualPipeV's
// overlapped pairs): the first three are no-ops on a pipeline without
// sharding or replicas, and an overlapped pair runs as its two actions.
//
//===----------------------------------------------------------------------===//

#include "pippy/Schedule/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace pippy::schedule;
using llvm::StringRef;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

bool isNoOp(StringRef cell) {
  StringRef rest = cell.ltrim("0123456789");
  return rest.size() < cell.size() &&
         (rest == "UNSHARD" || rest == "RESHARD" || rest == "REDUCE_GRAD");
}

/// The actions of one cell appended to `list`.
llvm::Error readCell(StringRef cell, int rank, std::vector<Action> &list) {
  auto where = [&] {
    return "rank " + std::to_string(rank) + " (CSV row " +
           std::to_string(rank + 1) + "): '" + cell.str() + "' ";
  };
  if (cell.empty() || isNoOp(cell))
    return llvm::Error::success();
  if (cell.consume_front("(")) {
    auto [inner, kind] = cell.split(')');
    if (kind != "OVERLAP_F_B")
      return error(where() + "is not an action");
    llvm::SmallVector<StringRef> parts;
    inner.split(parts, ';', -1, /*KeepEmpty=*/false);
    for (StringRef part : parts)
      if (llvm::Error err = readCell(part.trim(), rank, list))
        return err;
    return llvm::Error::success();
  }
  std::optional<Action> action = parseAction(cell);
  if (!action)
    return error(where() + "is not an action (expected e.g. 1F2, 0I3, "
                           "0SEND_B3)");
  list.push_back(*action);
  return llvm::Error::success();
}

/// Whether `list` has a send or receive.
bool hasCommunication(const std::vector<Action> &list) {
  return llvm::any_of(list, [](const Action &a) {
    return a.op == Op::SendF || a.op == Op::RecvF || a.op == Op::SendB ||
           a.op == Op::RecvB;
  });
}

/// Adds the rank's ALLREDUCE_TIED and each held stage's STEP where a list
/// lacks them, as addCommunication places them.
void addOptimizerActions(Schedule &schedule, const Topology &topo) {
  for (int r = 0; r < schedule.numRanks(); ++r) {
    std::vector<Action> &list = schedule.ranks[r];
    auto lacks = [&](Op op) {
      return llvm::none_of(list, [&](const Action &a) { return a.op == op; });
    };
    std::vector<int> stages = schedule.stagesOf(r);
    auto tied = llvm::find_if(stages, [&](int s) { return topo.isTied(s); });
    if (tied != stages.end() && lacks(Op::AllReduceTied))
      list.push_back({Op::AllReduceTied, *tied, 0});
    for (int s : stages)
      if (!llvm::is_contained(list, Action{Op::Step, s, 0}))
        list.push_back({Op::Step, s, 0});
  }
}

} // namespace

llvm::Expected<Schedule> pippy::schedule::parseCsv(StringRef text,
                                                   const Topology &topo,
                                                   int microbatches,
                                                   bool training) {
  Schedule schedule;
  schedule.microbatches = microbatches;
  schedule.training = training;
  schedule.stageRank.assign(topo.numStages, -1);
  llvm::SmallVector<StringRef> rows;
  text.split(rows, '\n', -1, /*KeepEmpty=*/true);
  while (!rows.empty() && rows.back().trim().empty())
    rows.pop_back();
  bool communication = false;
  for (StringRef row : rows) {
    int r = schedule.numRanks();
    std::vector<Action> list;
    llvm::SmallVector<StringRef> cells;
    row.trim().split(cells, ',', -1, /*KeepEmpty=*/true);
    for (StringRef cell : cells)
      if (llvm::Error err = readCell(cell.trim(), r, list))
        return std::move(err);
    for (const Action &a : list) {
      if (a.stage < 0 || a.stage >= topo.numStages)
        return error("rank " + llvm::Twine(r) + ": " + a.str() +
                     " names stage " + llvm::Twine(a.stage) +
                     "; the pipeline has stages 0.." +
                     llvm::Twine(topo.numStages - 1));
      int &holder = schedule.stageRank[a.stage];
      if (holder >= 0 && holder != r)
        return error("stage " + llvm::Twine(a.stage) +
                     " has actions on ranks " + llvm::Twine(holder) + " and " +
                     llvm::Twine(r) + "; a stage runs on one rank");
      holder = r;
    }
    communication |= hasCommunication(list);
    schedule.ranks.push_back(std::move(list));
  }
  if (schedule.ranks.empty())
    return error("the schedule file has no rows");
  for (int s = 0; s < topo.numStages; ++s)
    if (schedule.stageRank[s] < 0)
      return error("no rank of the schedule file runs stage " + llvm::Twine(s));
  if (!communication)
    addCommunication(schedule, topo);
  else if (training)
    addOptimizerActions(schedule, topo);
  return schedule;
}

bool pippy::schedule::isCsvFile(StringRef path) {
  return path.ends_with_insensitive(".csv");
}

std::string pippy::schedule::toCsv(const Schedule &schedule,
                                   bool withCommunication) {
  std::string text;
  for (const std::vector<Action> &list : schedule.ranks) {
    std::vector<std::string> cells;
    for (const Action &a : list) {
      bool comm = a.op == Op::SendF || a.op == Op::RecvF || a.op == Op::SendB ||
                  a.op == Op::RecvB;
      if (a.isCompute() || (withCommunication && comm))
        cells.push_back(a.str());
    }
    text += llvm::join(cells, ",") + "\n";
  }
  return text;
}
