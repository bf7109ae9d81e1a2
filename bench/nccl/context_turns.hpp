#pragma once
// The order in which ranks that share a GPU create their CUDA contexts (host code, no CUDA).
//
// Why: with three ranks on one GPU (the virtual cluster, --share-gpu) an 8K all_reduce batch took 9.0
// or 18.0 ms, one value a launch, flipping between identical launches; two ranks never flipped. The
// cause (measured: with the turns below, all 8 three-rank launches of two H100 runs took 9.0 ms,
// docs/bring-up.md): a GPU time-slices the contexts sharing it in a fixed cyclic order, the order they were
// created. A ring whose ranks get their slices in the ring's own order passes one step a slice; in the
// other cyclic order each step waits about a whole round. Two ranks have one cyclic order, three have
// two, and which one a launch got depended on which rank happened to create its context first.
// Creating the contexts in turns, in world-rank order, gives every launch the same order.
#include <string>
#include <vector>

namespace cclbench {

// `gpus_of_rank[r]`: the GPU identities (UUIDs) world rank r will use, one per local GPU (-g N); any
// string that names one physical GPU the same way on every rank. Returns each rank's turn.
//
// The rule (greedy, in world-rank order): a rank's turn is 0 when no lower rank uses any of its GPUs,
// else 1 + the highest turn among the lower ranks that use one of them. So two ranks that share a GPU
// never have the same turn, the ranks on one GPU take turns in increasing world-rank order, and
// without any shared GPU every rank has turn 0 (one turn: nothing to wait for). A rank listing one GPU
// twice shares it with nobody but itself.
std::vector<int> context_turns(const std::vector<std::vector<std::string>>& gpus_of_rank);

// 1 + the highest turn (0 for no ranks): how many turns `turns` takes.
int turn_count(const std::vector<int>& turns);

}  // namespace cclbench
