//===- Peers.h - who a placed stage talks to --------------------*- C++ -*-===//
//
// Internal to lib/Schedule: for a schedule's placement, each stage's
// producers and consumers split into those on other ranks (messages) and
// those on its own rank (local hand-overs), and the ranks each rank's
// ALLREDUCE_TIED meets. The checker and the simulator share it.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_LIB_SCHEDULE_PEERS_H
#define PIPPY_LIB_SCHEDULE_PEERS_H

#include "pippy/Schedule/Schedule.h"

#include <set>
#include <vector>

namespace pippy::schedule {

struct Peers {
  Peers(const Schedule &schedule, const Topology &topo) {
    int S = topo.numStages;
    remoteIn.resize(S);
    remoteOut.resize(S);
    localIn.resize(S);
    localOut.resize(S);
    auto rankOf = [&](int s) { return schedule.stageRank[s]; };
    for (int s = 0; s < S; ++s)
      for (int p : topo.producers[s]) {
        bool local = rankOf(p) == rankOf(s);
        (local ? localIn : remoteIn)[s].push_back(p);
        (local ? localOut : remoteOut)[p].push_back(s);
      }
    tiedRanks.resize(schedule.ranks.size());
    for (const std::vector<int> &group : topo.tiedGroups)
      for (int a : group)
        for (int b : group)
          tiedRanks[rankOf(a)].insert(rankOf(b));
  }

  std::vector<std::vector<int>> remoteIn, remoteOut; ///< per stage
  std::vector<std::vector<int>> localIn, localOut;   ///< per stage
  /// Per rank, the ranks (itself included) holding a stage tied to one of
  /// its stages; empty when it holds no tied stage.
  std::vector<std::set<int>> tiedRanks;
};

} // namespace pippy::schedule

#endif // PIPPY_LIB_SCHEDULE_PEERS_H
