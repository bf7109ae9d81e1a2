#include "bench/core/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
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
  EXPECT_NE(usage_error({"-m", "0"}).find("-m"), std::string::npos);
  EXPECT_NE(usage_error({"-R", "3"}).find("-R"), std::string::npos);
  EXPECT_NE(usage_error({"-x", "3"}).find("-x"), std::string::npos);
  EXPECT_NE(usage_error({"-I", "2"}).find("-I"), std::string::npos);
  EXPECT_NE(usage_error({"-N", "-1"}).find("-N"), std::string::npos);
  EXPECT_NE(usage_error({"--frobnicate"}).find("unknown flag"), std::string::npos);
  EXPECT_NE(usage_error({"-b"}).find("missing value"), std::string::npos);
  EXPECT_NE(usage_error({"-d", "float,"}).find("empty"), std::string::npos);
  EXPECT_NE(usage_error({"--point", "a/b"}).find("--point"), std::string::npos);
  EXPECT_NE(usage_error({"--backend", "mpi", "-g", "2"}).find("-g"), std::string::npos);
  EXPECT_NE(usage_error({"-b", "0", "-f", "2"}).find("-b 0"), std::string::npos);
}

// Every flag of nccl-tests 2.19.6 (src/common.cu: getopt string
// "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:" and its longopts table), written
// out here by hand, and what coll_perf does with each. A flag added to or dropped from coll_perf's
// table, or handled differently, fails this test.
enum class Expect { implemented, no_op, refused };
struct FlagCase {
  const char* short_name;
  const char* long_name;
  Expect expect;
  std::vector<std::string> example;  // a valid use (value included) for implemented/no-op flags
};
const std::vector<FlagCase>& nccl_tests_219_flags() {
  static const std::vector<FlagCase> flags = {
      {"-t", "--nthreads", Expect::refused, {"2"}},
      {"-g", "--ngpus", Expect::implemented, {"2"}},
      {"-b", "--minbytes", Expect::implemented, {"8K"}},
      {"-e", "--maxbytes", Expect::implemented, {"64M"}},
      {"-i", "--stepbytes", Expect::implemented, {"1M"}},
      {"-f", "--stepfactor", Expect::implemented, {"2"}},
      {"-n", "--iters", Expect::implemented, {"5"}},
      {"-m", "--agg_iters", Expect::implemented, {"4"}},
      {"-w", "--warmup_iters", Expect::implemented, {"3"}},
      {"-N", "--run_cycles", Expect::implemented, {"0"}},
      {"-p", "--parallel_init", Expect::refused, {"1"}},
      {"-c", "--check", Expect::implemented, {"0"}},
      {"-o", "--op", Expect::implemented, {"mulsum"}},
      {"-d", "--datatype", Expect::implemented, {"bfloat16"}},
      {"-r", "--root", Expect::implemented, {"1"}},
      {"-z", "--blocking", Expect::implemented, {"1"}},
      {"-y", "--stream_null", Expect::refused, {"1"}},
      {"-T", "--timeout", Expect::implemented, {"30"}},
      {"-G", "--cudagraph", Expect::implemented, {"10"}},
      {"-C", "--report_cputime", Expect::no_op, {"1"}},
      {"-S", "--report_timestamps", Expect::no_op, {"1"}},
      {"-J", "--output_file", Expect::implemented, {"out.json"}},
      {"-a", "--average", Expect::implemented, {"2"}},
      {"-R", "--local_register", Expect::implemented, {"2"}},
      {"-x", "--cta_policy", Expect::implemented, {"1"}},
      {"-D", "--device_implementation", Expect::refused, {"1"}},
      {"-V", "--device_cta_count", Expect::refused, {"16"}},
      {"-M", "--memory", Expect::no_op, {"1"}},
      {"-u", "--unalign", Expect::implemented, {"3"}},
      {"-I", "--per_iter_timing", Expect::no_op, {"1"}},
      {"-K", "--per_iter_skip", Expect::refused, {"2"}},
      {"-h", "--help", Expect::implemented, {}},
  };
  return flags;
}

TEST(NcclTestsFlags, TheTableListsEveryNcclTests219FlagWithItsHandling) {
  const auto& table = nccl_tests_flags();
  ASSERT_EQ(table.size(), nccl_tests_219_flags().size());
  for (const FlagCase& expected : nccl_tests_219_flags()) {
    const auto found = std::find_if(table.begin(), table.end(), [&](const NcclTestsFlag& flag) {
      return std::string(flag.short_name) == expected.short_name;
    });
    ASSERT_NE(found, table.end()) << expected.short_name << " missing from coll_perf's table";
    EXPECT_EQ(std::string(found->long_name), expected.long_name);
    const FlagHandling handling = expected.expect == Expect::implemented ? FlagHandling::implemented
                                  : expected.expect == Expect::no_op     ? FlagHandling::accepted_no_op
                                                                         : FlagHandling::refused;
    EXPECT_EQ(found->handling, handling) << expected.short_name;
    // No-ops and refusals say why (in --help and in the refusal).
    if (handling != FlagHandling::implemented) {
      EXPECT_GT(std::string(found->note).size(), 10u) << expected.short_name;
    }
  }
}

TEST(NcclTestsFlags, EachFlagIsParsedAcceptedOrRefusedAsTheTableSays) {
  const Config defaults = *parse({});
  for (const FlagCase& flag : nccl_tests_219_flags()) {
    if (std::string(flag.short_name) == "-h") continue;  // prints help: HelpReturnsNothing
    for (const char* name : {flag.short_name, flag.long_name}) {
      std::vector<std::string> args = {name};
      args.insert(args.end(), flag.example.begin(), flag.example.end());
      if (std::string(flag.short_name) == "-i") args.insert(args.begin(), {"-b", "1M", "-e", "4M"});
      if (flag.expect == Expect::refused) {
        const std::string error = usage_error(args);
        EXPECT_NE(error.find("not supported by cclbench ("), std::string::npos) << name << ": '" << error << "'";
        EXPECT_NE(error.find(name), std::string::npos) << error;
        continue;
      }
      std::optional<Config> config;
      ASSERT_NO_THROW(config = parse(args)) << name << " " << usage_error(args);
      ASSERT_TRUE(config.has_value()) << name;
      if (flag.expect == Expect::no_op) {
        // Nothing that shapes the measurement changes.
        EXPECT_EQ(make_cases(*config, standard_collectives(), 4).size(), make_cases(defaults, standard_collectives(), 4).size()) << name;
        EXPECT_EQ(config->iterations, defaults.iterations) << name;
        EXPECT_EQ(config->graph_launches, defaults.graph_launches) << name;
        EXPECT_EQ(config->ops_per_launch, defaults.ops_per_launch) << name;
        EXPECT_EQ(config->blocking, defaults.blocking) << name;
      }
    }
  }
}

TEST(NcclTestsFlags, NewlyImplementedFlagsSetTheirFields) {
  const Config config = *parse({"-m", "4", "-N", "0", "-R", "2", "-u", "3", "-x", "2", "-G", "10", "-o", "all"});
  EXPECT_EQ(config.ops_per_launch, 4);
  EXPECT_EQ(config.run_cycles, 0);
  EXPECT_EQ(config.registration, Registration::symmetric);
  EXPECT_EQ(config.unalign_elements, 3);
  EXPECT_EQ(config.cta_policy, 2);
  EXPECT_EQ(config.graph_launches, 10);
  // -o all includes nccl-tests' mulsum.
  EXPECT_EQ(config.ops, (std::vector<ReduceOp>{ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg,
                                               ReduceOp::mulsum}));
  EXPECT_EQ(parse({"-o", "mulsum"})->ops, std::vector<ReduceOp>{ReduceOp::mulsum});
  EXPECT_EQ(parse({})->cta_policy, -1);  // not set: NCCL's default, recorded as null
  EXPECT_EQ(name_of(Registration::local), "local");
}

TEST(NcclTestsFlags, MpiBackendRefusesNcclOnlyFlagsWithTheReason) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"-G", "2"}, {"-R", "1"}, {"-R", "2"}, {"-x", "0"}, {"-m", "2"}, {"-u", "1"}}) {
    const std::string error = usage_error({"--backend", "mpi", flag, value});
    EXPECT_EQ(error.rfind(flag + ":", 0), 0u) << error;
    EXPECT_NE(error.find("(--backend mpi)"), std::string::npos) << error;
    // The same refusal is what coll_perf applies when automatic selection falls back to MPI.
    EXPECT_TRUE(mpi_backend_refusal(*parse({flag, value})).has_value()) << flag;
  }
  // -N, -o mulsum and the no-ops are fine on MPI (mulsum is then skipped per case, with a reason).
  EXPECT_EQ(usage_error({"--backend", "mpi", "-N", "2", "-o", "mulsum", "-I", "1", "-C", "1", "-S", "1", "-M", "1"}), "");
  EXPECT_FALSE(mpi_backend_refusal(*parse({"-N", "3"})).has_value());
}

TEST(Config, NetdevsNamesInterfacesAndRefusesBadNames) {
  EXPECT_TRUE(parse({})->netdevs.empty());
  EXPECT_EQ(parse({"--netdevs", "eth0,eth3"})->netdevs, (std::vector<std::string>{"eth0", "eth3"}));
  EXPECT_EQ(parse({"--netdevs", "lo"})->netdevs, (std::vector<std::string>{"lo"}));
  EXPECT_EQ(parse({"--netdevs", "enp1s0f0.100"})->netdevs, (std::vector<std::string>{"enp1s0f0.100"}));
  for (const std::string bad : {"", "eth0,", ",eth0", "eth/0", "eth0:1", "a b", "..", "sixteen-chars-xx"}) {
    EXPECT_NE(usage_error({"--netdevs", bad}).find("--netdevs:"), std::string::npos) << "'" << bad << "'";
  }
  EXPECT_NE(usage_error({"--netdevs", "eth0,eth0"}).find("given twice"), std::string::npos);
  EXPECT_NE(usage_error({"--netdevs"}), "");
}

TEST(Config, SplitRanksComeWithTheirPointsAndAloneOwnTheOutputs) {
  const Config config = *parse({"--split-ranks", "16", "--split-points", "points.json"});
  EXPECT_EQ(config.split_ranks, 16);
  EXPECT_EQ(config.split_points_path, "points.json");
  EXPECT_EQ(parse({})->split_ranks, 0);
  EXPECT_NE(usage_error({"--split-ranks", "2"}).find("go together"), std::string::npos);
  EXPECT_NE(usage_error({"--split-points", "p.json"}).find("go together"), std::string::npos);
  EXPECT_NE(usage_error({"--split-ranks", "0", "--split-points", "p.json"}).find("--split-ranks"), std::string::npos);
  EXPECT_NE(usage_error({"--split-ranks", "2", "--split-points", ""}).find("needs a file name"), std::string::npos);
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"-J", "x.json"}, {"--point", "p"}, {"--csv", "x.csv"}, {"--jsonl", "x.jsonl"}, {"--samples", "s.jsonl"},
           {"--tuning-from", "t.json"}}) {
    std::vector<std::string> args = {"--split-ranks", "2", "--split-points", "p.json"};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_NE(usage_error(args).find("--split-"), std::string::npos) << extra.front();
  }
}

TEST(Config, SplitPointsFileIsOneEntryPerGroup) {
  const std::vector<SplitPoint> points =
      parse_split_points(R"([{"point": "pair.r0.a.b", "json": "raw/a.json"}, {"point": "pair.r0.c.d", "json": "raw/c.json"}])",
                         "p.json", 2);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[1].point, "pair.r0.c.d");
  EXPECT_EQ(points[1].json_path, "raw/c.json");
  const auto error = [](const std::string& text, int groups) {
    try {
      parse_split_points(text, "p.json", groups);
    } catch (const UsageError& failure) {
      return std::string(failure.what());
    }
    return std::string();
  };
  EXPECT_NE(error(R"([{"point": "a", "json": "a.json"}])", 2).find("1 entries for 2 group(s)"), std::string::npos);
  EXPECT_NE(error("{}", 1).find("not a JSON list"), std::string::npos);
  EXPECT_NE(error("[1", 1).find("not a JSON list"), std::string::npos);
  EXPECT_NE(error(R"([{"point": "a"}])", 1).find("entry 0: expected"), std::string::npos);
  EXPECT_NE(error(R"([{"point": "a b", "json": "a.json"}])", 1).find("entry 0 point: 'a b'"), std::string::npos);
  EXPECT_NE(error(R"([{"point": "a", "json": ""}])", 1).find("empty json path"), std::string::npos);
  EXPECT_NE(error(R"([{"point": "a", "json": "x.json"}, {"point": "b", "json": "x.json"}])", 2).find("given twice"),
            std::string::npos);
}

TEST(NcclTestsFlags, HelpListsTheNoOpsAndRefusalsWithTheirReasons) {
  const std::string help = help_text("coll_perf");
  for (const NcclTestsFlag& flag : nccl_tests_flags()) {
    EXPECT_NE(help.find(flag.short_name + std::string(", ") + flag.long_name), std::string::npos) << flag.short_name;
    if (flag.handling != FlagHandling::implemented) {
      EXPECT_NE(help.find(flag.note), std::string::npos) << flag.short_name;
    }
  }
  EXPECT_NE(help.find("mulsum"), std::string::npos);
}

TEST(Cases, NcclTestsOrderAndOpNoneForDataMovement) {
  const Config config = *parse({"-b", "8K", "-e", "16K", "-f", "2", "--coll", "all_reduce,all_gather", "-o", "sum,max", "-d", "float,int8"});
  const std::vector<CaseSpec> cases = make_cases(config, standard_collectives(), 4);
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
  const std::vector<CaseSpec> cases = make_cases(config, standard_collectives(), 4);
  int in_place = 0;
  for (const CaseSpec& spec : cases) in_place += spec.in_place;
  EXPECT_EQ(cases.size(), 112u);
  EXPECT_EQ(in_place, 56);
}

}  // namespace
}  // namespace cclbench
