#include "bench/core/config.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/core/runner.hpp"

namespace cclbench {
namespace {

std::optional<Config> parse(std::vector<std::string> args, const std::string& program = "coll_perf") {
  args.insert(args.begin(), program);
  std::vector<const char*> argv;
  for (const auto& arg : args) argv.push_back(arg.c_str());
  return parse_config(static_cast<int>(argv.size()), argv.data());
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(Config, NcclTestsFlagsMeanWhatTheyMeanThere) {
  const Config config = *parse({"-b", "8K", "-e", "64M", "-f", "2", "-n", "50", "-w", "5", "-c", "2", "-o", "max", "-d", "half", "-a", "3"});
  EXPECT_EQ(config.min_bytes, 8192u);
  EXPECT_EQ(config.max_bytes, 64u << 20);
  EXPECT_EQ(config.step_factor, 2);
  EXPECT_EQ(config.iterations, 50);
  EXPECT_EQ(config.warmup_iterations, 5);
  EXPECT_EQ(config.check_iterations, 2);
  EXPECT_EQ(config.ops, std::vector<ReduceOp>{ReduceOp::max});
  EXPECT_EQ(config.dtypes, std::vector<DataType>{DataType::float16});
  EXPECT_EQ(config.batch_average, BatchAverage::max);
  EXPECT_EQ(config.collectives.size(), 4u);  // default: the four
}

TEST(Config, AttachedValuesAndLongForms) {
  const Config config = *parse({"-b8K", "--maxbytes=1M", "--stepfactor", "4", "--coll", "alltoall,all_reduce"});
  EXPECT_EQ(config.min_bytes, 8192u);
  EXPECT_EQ(config.max_bytes, 1u << 20);
  EXPECT_EQ(config.collectives, (std::vector<Collective>{Collective::alltoall, Collective::all_reduce}));
}

TEST(Config, SweepIncludesBothEnds) {
  EXPECT_EQ(sweep_sizes(*parse({"-b", "8K", "-e", "64M", "-f", "2"})).size(), 14u);
  const auto stepped = sweep_sizes(*parse({"-b", "1K", "-e", "4K", "-i", "1K"}));
  EXPECT_EQ(stepped, (std::vector<std::uint64_t>{1024, 2048, 3072, 4096}));
}

TEST(Config, ExactSizesReplaceTheSweep) {
  // Decode message sizes (hidden 7168 x batch x 2 bytes): 14336 and 917504, not a power-of-two sweep.
  const Config config = *parse({"--sizes", "917504,14336,43008,14336"});
  EXPECT_EQ(sweep_sizes(config), (std::vector<std::uint64_t>{14336, 43008, 917504}));
  EXPECT_EQ(config.min_bytes, 14336u);
  EXPECT_EQ(config.max_bytes, 917504u);  // the NCCL backend sizes its buffers from this
  EXPECT_EQ(sweep_sizes(*parse({"--sizes", "1K"})), (std::vector<std::uint64_t>{1024}));
  EXPECT_NE(usage_error({"--sizes", "14336", "-b", "8K"}).find("--sizes replaces"), std::string::npos);
  EXPECT_NE(usage_error({"--sizes", "14336", "-f", "2"}).find("--sizes replaces"), std::string::npos);
  EXPECT_NE(usage_error({"--sizes", "14336,0"}), "");
  EXPECT_NE(usage_error({"--sizes", "14336,,8K"}), "");
  EXPECT_NE(usage_error({"--sizes", "abc"}), "");
}

TEST(Config, AliasProgramsFixTheirCollective) {
  const Config config = *parse({"-b", "8K"}, "/opt/bin/all_gather_perf");
  EXPECT_EQ(config.collectives, std::vector<Collective>{Collective::all_gather});
  EXPECT_EQ(usage_error({"--coll", "all_reduce"}), "");  // fine for coll_perf...
  EXPECT_THROW(parse({"--coll", "all_reduce"}, "all_gather_perf"), UsageError);  // ...not for an alias
}

TEST(Config, HelpReturnsNothing) {
  testing::internal::CaptureStdout();
  EXPECT_FALSE(parse({"--help"}).has_value());
  const std::string help = testing::internal::GetCapturedStdout();
  EXPECT_NE(help.find("--expect-transport"), std::string::npos);
  EXPECT_NE(help.find("Examples:"), std::string::npos);
}

TEST(Config, BadInputNamesTheFlagAndWhatIsAccepted) {
  EXPECT_NE(usage_error({"-b", "64M", "-e", "8K"}).find("-b"), std::string::npos);
  EXPECT_NE(usage_error({"-b", "foo"}).find("accepted"), std::string::npos);
  EXPECT_NE(usage_error({"-f", "1"}).find("-f"), std::string::npos);
  EXPECT_NE(usage_error({"-n", "0"}).find("-n"), std::string::npos);
  EXPECT_NE(usage_error({"-d", "float17"}).find("float17"), std::string::npos);
  EXPECT_NE(usage_error({"-o", "mean"}).find("accepted"), std::string::npos);
  EXPECT_NE(usage_error({"--coll", "allreduce2"}).find("--coll"), std::string::npos);
  EXPECT_NE(usage_error({"--backend", "gloo"}).find("nccl, mpi"), std::string::npos);
  EXPECT_NE(usage_error({"-t", "2"}).find("not supported"), std::string::npos);
  EXPECT_NE(usage_error({"-m", "2"}).find("-m"), std::string::npos);
  EXPECT_NE(usage_error({"--frobnicate"}).find("unknown flag"), std::string::npos);
  EXPECT_NE(usage_error({"-b"}).find("missing value"), std::string::npos);
  EXPECT_NE(usage_error({"-d", "float,"}).find("empty"), std::string::npos);
  EXPECT_NE(usage_error({"--point", "a/b"}).find("--point"), std::string::npos);
  EXPECT_NE(usage_error({"--backend", "mpi", "-g", "2"}).find("-g"), std::string::npos);
  EXPECT_NE(usage_error({"-b", "0", "-f", "2"}).find("-b 0"), std::string::npos);
}

TEST(Cases, NcclTestsOrderAndOpNoneForDataMovement) {
  const Config config = *parse({"-b", "8K", "-e", "16K", "-f", "2", "--coll", "all_reduce,all_gather", "-o", "sum,max", "-d", "float,int8"});
  const std::vector<CaseSpec> cases = make_cases(config, 4);
  // all_reduce: 2 dtypes x 2 ops x 2 sizes x 2 placements; all_gather: 2 dtypes x 1 x 2 x 2.
  ASSERT_EQ(cases.size(), 16u + 8u);
  EXPECT_EQ(cases[0].case_id(), "all_reduce.float.sum.out.8K");
  EXPECT_EQ(cases[1].case_id(), "all_reduce.float.sum.in.8K");
  EXPECT_EQ(cases[2].case_id(), "all_reduce.float.sum.out.16K");
  EXPECT_EQ(cases[4].case_id(), "all_reduce.float.max.out.8K");
  EXPECT_EQ(cases[16].case_id(), "all_gather.float.none.out.8K");
  for (const CaseSpec& spec : cases) EXPECT_EQ(spec.nranks, 4);
}

TEST(Cases, DefaultSweepHas56RecordsPerPlacement) {
  const Config config = *parse({"-b", "8K", "-e", "64M", "-f", "2"});
  const std::vector<CaseSpec> cases = make_cases(config, 4);
  int in_place = 0;
  for (const CaseSpec& spec : cases) in_place += spec.in_place;
  EXPECT_EQ(cases.size(), 112u);
  EXPECT_EQ(in_place, 56);
}

}  // namespace
}  // namespace cclbench
