#include "bench/nccl/context_turns.hpp"

#include <algorithm>
#include <map>

namespace cclbench {

std::vector<int> context_turns(const std::vector<std::vector<std::string>>& gpus_of_rank) {
  // Per GPU, the turn of the highest rank so far that uses it. Turns on one GPU only grow with the
  // rank (each rank's turn exceeds every lower sharer's), so that is also the highest turn on it: the
  // rule's "max over lower ranks sharing a GPU" without comparing every pair of ranks.
  std::map<std::string, int> last_turn_on;
  std::vector<int> turns;
  turns.reserve(gpus_of_rank.size());
  for (const std::vector<std::string>& gpus : gpus_of_rank) {
    int turn = 0;
    for (const std::string& gpu : gpus) {
      if (const auto found = last_turn_on.find(gpu); found != last_turn_on.end()) turn = std::max(turn, found->second + 1);
    }
    for (const std::string& gpu : gpus) last_turn_on[gpu] = turn;
    turns.push_back(turn);
  }
  return turns;
}

int turn_count(const std::vector<int>& turns) {
  return turns.empty() ? 0 : 1 + *std::max_element(turns.begin(), turns.end());
}

}  // namespace cclbench
