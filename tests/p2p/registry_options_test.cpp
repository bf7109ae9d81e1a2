#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bench/core/errors.hpp"
#include "bench/p2p/options.hpp"
#include "bench/p2p/test_registry.hpp"

namespace cclbench::p2p {
namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "p2p_matrix");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

TEST(P2pRegistry, NamesAreUniqueStableAndRoundTrip) {
  std::set<std::string> names;
  for (const TestInfo& info : all_tests()) {
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name;
    EXPECT_EQ(parse_test_name(info.name), info.id);
    EXPECT_FALSE(info.description.empty());
  }
  EXPECT_EQ(all_tests().size(), 20u);
  for (const char* required : {"d2d_ce_write_uni", "d2d_ce_read_uni", "d2d_ce_write_bi", "d2d_sm_write_uni", "d2d_sm_read_uni",
                               "d2d_sm_write_bi", "d2d_staged_uni", "d2d_staged_bi", "d2d_ce_latency", "d2d_sm_latency",
                               "h2d_ce_local_numa", "d2h_ce_local_numa", "bi_h2d_d2h_ce_local_numa", "h2d_ce_remote_numa",
                               "d2h_ce_remote_numa", "device_local_copy_ce", "device_local_copy_sm"}) {
    EXPECT_TRUE(names.count(required)) << required;
  }
}

TEST(P2pRegistry, BytesCountedMatchesTheDirectionality) {
  EXPECT_EQ(test_info(TestId::d2d_ce_write_uni).bytes_counted, BytesCounted::one_direction);
  EXPECT_EQ(test_info(TestId::d2d_ce_write_bi).bytes_counted, BytesCounted::both_directions);
  EXPECT_EQ(test_info(TestId::bi_h2d_d2h_ce_local_numa).bytes_counted, BytesCounted::both_directions);
  // Schema 1.1: a copy within one GPU counts the bytes copied, as nvbandwidth's device_local_copy.
  EXPECT_EQ(test_info(TestId::device_local_copy_sm).bytes_counted, BytesCounted::one_direction);
  EXPECT_EQ(test_info(TestId::device_local_copy_ce).bytes_counted, BytesCounted::one_direction);
  EXPECT_EQ(test_info(TestId::d2d_sm_latency).bytes_counted, BytesCounted::not_applicable);
  EXPECT_EQ(test_info(TestId::device_local_copy_ce).default_bytes, 1ull << 30);
  EXPECT_EQ(test_info(TestId::h2d_ce_local_numa).default_bytes, 256ull << 20);
}

TEST(P2pRegistry, OneWayBandwidthMatricesAndLatenciesMeasureTheirDiagonal) {
  // Schema 1.1: the diagonal of a one-way matrix is the local device copy (nvbandwidth's
  // device_local_copy); two copies at once on one GPU (bi) or a staged self copy mean nothing.
  using enum TestId;
  for (TestId id : {d2d_ce_write_uni, d2d_ce_read_uni, d2d_sm_write_uni, d2d_sm_read_uni, d2d_ce_latency, d2d_sm_latency}) {
    EXPECT_TRUE(test_info(id).diagonal) << test_info(id).name;
  }
  for (TestId id : {d2d_ce_write_bi, d2d_ce_read_bi, d2d_sm_write_bi, d2d_sm_read_bi, d2d_staged_uni, d2d_staged_bi}) {
    EXPECT_FALSE(test_info(id).diagonal) << test_info(id).name;
  }
}

TEST(P2pRegistry, SelectionKeepsRegistryOrderAndDropsDuplicates) {
  const auto selected = select_tests("device_local_copy_sm,d2d_ce_write_uni,device_local_copy_sm");
  ASSERT_EQ(selected.size(), 2u);
  EXPECT_EQ(selected[0], TestId::d2d_ce_write_uni);
  EXPECT_EQ(selected[1], TestId::device_local_copy_sm);
  EXPECT_EQ(select_tests("all").size(), all_tests().size());
}

TEST(P2pRegistry, SelectionRejectsUnknownAndEmptyNames) {
  EXPECT_THROW(select_tests("d2d_ce_write_uni,nope"), UsageError);
  EXPECT_THROW(select_tests(""), UsageError);
  EXPECT_THROW(select_tests("d2d_ce_write_uni,"), UsageError);
  EXPECT_THROW(select_tests(",d2d_ce_write_uni"), UsageError);
  try {
    select_tests("bogus_test");
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bogus_test"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--list"), std::string::npos);
  }
}

TEST(P2pRegistry, ListTextHasOneLinePerTestStartingWithItsName) {
  const std::string text = list_text();
  std::size_t lines = 0, begin = 0;
  for (std::size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1, ++lines) {
    const std::string line = text.substr(begin, end - begin);
    EXPECT_EQ(line.rfind(std::string(all_tests()[lines].name) + " ", 0), 0u) << line;
  }
  EXPECT_EQ(lines, all_tests().size());
}

TEST(P2pPairs, AllOrderedPairsWithoutDiagonal) {
  const auto pairs = enumerate_pairs(3, false, std::nullopt);
  const std::vector<std::pair<int, int>> expected{{0, 1}, {0, 2}, {1, 0}, {1, 2}, {2, 0}, {2, 1}};
  EXPECT_EQ(pairs, expected);
  EXPECT_EQ(enumerate_pairs(3, true, std::nullopt).size(), 9u);
  EXPECT_TRUE(enumerate_pairs(1, false, std::nullopt).empty());
  EXPECT_EQ(enumerate_pairs(1, true, std::nullopt), (std::vector<std::pair<int, int>>{{0, 0}}));
  EXPECT_TRUE(enumerate_pairs(0, true, std::nullopt).empty());
}

TEST(P2pPairs, OnePairOnlyAndOutOfRangeIsUsageError) {
  EXPECT_EQ(enumerate_pairs(4, false, std::pair{2, 1}), (std::vector<std::pair<int, int>>{{2, 1}}));
  EXPECT_TRUE(enumerate_pairs(4, false, std::pair{1, 1}).empty());
  EXPECT_EQ(enumerate_pairs(4, true, std::pair{1, 1}).size(), 1u);
  EXPECT_THROW(enumerate_pairs(2, false, std::pair{0, 2}), UsageError);
}

TEST(P2pOptions, Defaults) {
  const Options o = parse({});
  EXPECT_EQ(o.tests.size(), all_tests().size());
  EXPECT_EQ(o.repetitions, 5);
  EXPECT_FALSE(o.min_bytes);
  EXPECT_EQ(sizes_for(o, test_info(TestId::d2d_ce_write_uni)), (std::vector<std::uint64_t>{256ull << 20}));
  EXPECT_EQ(sizes_for(o, test_info(TestId::device_local_copy_ce)), (std::vector<std::uint64_t>{1ull << 30}));
  EXPECT_EQ(sizes_for(o, test_info(TestId::d2d_ce_latency)), (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(sizes_for(o, test_info(TestId::d2d_sm_latency)), (std::vector<std::uint64_t>{256ull << 20}));
}

TEST(P2pOptions, SweepFromBToEByFactor) {
  const Options o = parse({"-b", "8K", "-e", "1G", "-f", "2", "-t", "d2d_ce_write_uni", "--pair", "0,1", "-n", "7"});
  const auto sizes = sizes_for(o, test_info(TestId::d2d_ce_write_uni));
  ASSERT_EQ(sizes.size(), 18u);
  EXPECT_EQ(sizes.front(), 8192u);
  EXPECT_EQ(sizes.back(), 1ull << 30);
  EXPECT_EQ(o.pair, (std::pair<int, int>{0, 1}));
  EXPECT_EQ(o.repetitions, 7);
  EXPECT_EQ(o.tests, (std::vector<TestId>{TestId::d2d_ce_write_uni}));
  // Latency tests keep their own sizes under a sweep.
  EXPECT_EQ(sizes_for(o, test_info(TestId::d2d_ce_latency)), (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(sizes_for(parse({"-b", "64M"}), test_info(TestId::h2d_ce_local_numa)), (std::vector<std::uint64_t>{64ull << 20}));
  EXPECT_EQ(sizes_for(parse({"-e", "32K"}), test_info(TestId::h2d_ce_local_numa)),
            (std::vector<std::uint64_t>{8192, 16384, 32768}));
  EXPECT_EQ(sizes_for(parse({"-b", "1000", "-e", "9000", "-f", "3"}), test_info(TestId::h2d_ce_local_numa)),
            (std::vector<std::uint64_t>{1000, 3000, 9000}));
}

TEST(P2pOptions, BadInputIsUsageError) {
  const std::vector<std::vector<std::string>> bad{
      {"-b", "12Q"},        {"-b", "1G", "-e", "1M"}, {"-b", "0"},          {"-f", "1"},
      {"-n", "0"},          {"-n", "x"},              {"-t", "nope"},       {"--pair", "1"},
      {"--pair", "a,b"},    {"--pair", "-1,0"},       {"--bogus"},          {"-b"},
      {"--chase-stride", "12"}, {"--chase-bytes", "256", "--chase-stride", "256"},
      {"--out", "d", "--json", "x.json"}, {"--json", ""}, {"--blocker-timeout", "0"}};
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_THROW(parse(args), UsageError) << joined;
  }
}

TEST(P2pOptions, HelpListAndHostExpansion) {
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"--list"}).list);
  EXPECT_EQ(expand_host("out/%h.json", "node7"), "out/node7.json");
  EXPECT_EQ(expand_host("%h-%h%", "a"), "a-a%");
  EXPECT_NE(help_text().find("--pair"), std::string::npos);
}

}  // namespace
}  // namespace cclbench::p2p
