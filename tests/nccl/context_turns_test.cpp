// context_turns (bench/nccl/context_turns.hpp): the order in which ranks sharing a GPU create their
// CUDA contexts. Host code, no GPU (label unit). Every expected turn below is worked out by hand from
// the rule (0 with no lower sharer, else 1 + the highest turn of the lower ranks sharing a GPU).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/nccl/context_turns.hpp"

namespace cclbench {
namespace {

using Gpus = std::vector<std::vector<std::string>>;

TEST(ContextTurns, ThreeHostsRanksOnOneCardTakeThreeTurnsInRankOrder) {
  // The virtual cluster: each node's one rank on the same physical GPU.
  const Gpus gpus = {{"GPU-A"}, {"GPU-A"}, {"GPU-A"}};
  EXPECT_EQ(context_turns(gpus), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(turn_count(context_turns(gpus)), 3);
}

TEST(ContextTurns, FourRanksOnOneCardAsShareGpu4) {
  const Gpus gpus = {{"GPU-A"}, {"GPU-A"}, {"GPU-A"}, {"GPU-A"}};
  EXPECT_EQ(context_turns(gpus), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(turn_count(context_turns(gpus)), 4);
}

TEST(ContextTurns, NoSharedCardIsOneTurnForEveryone) {
  const Gpus one_each = {{"GPU-A"}, {"GPU-B"}, {"GPU-C"}, {"GPU-D"}};
  EXPECT_EQ(context_turns(one_each), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(turn_count(context_turns(one_each)), 1);
  const Gpus two_each = {{"GPU-A", "GPU-B"}, {"GPU-C", "GPU-D"}};  // -g 2, one rank per node
  EXPECT_EQ(context_turns(two_each), (std::vector<int>{0, 0}));
  EXPECT_EQ(turn_count(context_turns(two_each)), 1);
  EXPECT_EQ(context_turns({{"GPU-A"}}), (std::vector<int>{0}));
}

TEST(ContextTurns, TwoCardsSharedInterleaved) {
  // A: ranks 0, 2, 4; B: ranks 1, 3. Each card's ranks count up on their own.
  const Gpus alternating = {{"GPU-A"}, {"GPU-B"}, {"GPU-A"}, {"GPU-B"}, {"GPU-A"}};
  EXPECT_EQ(context_turns(alternating), (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(turn_count(context_turns(alternating)), 3);
  // A: ranks 0, 1, 3; B: ranks 2, 4.
  const Gpus uneven = {{"GPU-A"}, {"GPU-A"}, {"GPU-B"}, {"GPU-A"}, {"GPU-B"}};
  EXPECT_EQ(context_turns(uneven), (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(turn_count(context_turns(uneven)), 3);
}

TEST(ContextTurns, TwoCardRanksInARingNeverShareATurnOnACard) {
  // -g 2: rank 0 {A,B}, rank 1 {B,C}, rank 2 {C,A}. Counting each card's users alone would give rank 2
  // turn 1 on both A (after rank 0) and C (after rank 1): the same turn as rank 1, on card C.
  // Rank 1 follows rank 0 on B (turn 1); rank 2 follows rank 1 on C and rank 0 on A (turn 2).
  const Gpus ring3 = {{"GPU-A", "GPU-B"}, {"GPU-B", "GPU-C"}, {"GPU-C", "GPU-A"}};
  EXPECT_EQ(context_turns(ring3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(turn_count(context_turns(ring3)), 3);
  // Four ranks around four cards: two turns would keep sharers apart (0,1,0,1), but on C rank 2 would
  // then go before rank 1; rank order on every card needs 0,1,2 and rank 3 after rank 2 on D.
  const Gpus ring4 = {{"GPU-A", "GPU-B"}, {"GPU-B", "GPU-C"}, {"GPU-C", "GPU-D"}, {"GPU-D", "GPU-A"}};
  EXPECT_EQ(context_turns(ring4), (std::vector<int>{0, 1, 2, 3}));
}

TEST(ContextTurns, ARankTakesTheTurnAfterItsLatestSharerOnAnyCard) {
  // Rank 2 uses A (rank 0, turn 0) and B (rank 1, turn 0): turn 1. Rank 3 on B follows rank 2: turn 2,
  // not 1 (1 + rank 1's turn), which rank 2 holds on B.
  const Gpus gpus = {{"GPU-A"}, {"GPU-B"}, {"GPU-A", "GPU-B"}, {"GPU-B"}};
  EXPECT_EQ(context_turns(gpus), (std::vector<int>{0, 0, 1, 2}));
}

TEST(ContextTurns, NoRanksAndRanksWithoutGpus) {
  EXPECT_EQ(context_turns({}), (std::vector<int>{}));
  EXPECT_EQ(turn_count({}), 0);
  const Gpus gpus = {{}, {"GPU-A"}, {}, {"GPU-A"}};
  EXPECT_EQ(context_turns(gpus), (std::vector<int>{0, 0, 0, 1}));
}

}  // namespace
}  // namespace cclbench
