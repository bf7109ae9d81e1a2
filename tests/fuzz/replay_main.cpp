// Replays fuzz inputs through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so the
// normal (gcc) build runs every committed regression input and seed under CTest's fuzz label, not
// only scripts/ci_fuzz.sh with clang. A finding aborts (the target calls std::abort), which fails
// the test; no input at all fails too (a glob that matched nothing must not pass).
// Usage: fuzz_replay_<target> FILE_OR_DIR...
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

int replay_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "fuzz replay: cannot read " << path << "\n";
    return -1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::cerr << "fuzz replay: " << path.string() << " (" << bytes.size() << " bytes)\n";
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path = argv[i];
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.push_back(path);
    }
    for (const auto& file : files) {
      const int outcome = replay_file(file);
      if (outcome < 0) return 1;
      replayed += outcome;
    }
  }
  if (replayed == 0) {
    std::cerr << "fuzz replay: no input replayed\n";
    return 1;
  }
  std::cout << "fuzz replay: " << replayed << " input(s), no finding\n";
  return 0;
}
