#include "bench/core/file_io.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "bench/core/errors.hpp"

namespace cclbench {
namespace {

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cclbench_fileio_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FileIoTest, AtomicWriteReplacesWholeFileWithMode0644AndNoTemporary) {
  const std::string path = dir_ + "/result.json";
  write_file_atomic(path, "first");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_text_file(path), "second");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(FileIoTest, AtomicWriteRefusesSymlink) {
  const std::string target = dir_ + "/target";
  const std::string link = dir_ + "/link";
  write_file_atomic(target, "keep");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THROW(write_file_atomic(link, "overwrite"), FatalError);
  EXPECT_EQ(read_text_file(target), "keep");
}

// A rank killed between creating and renaming its temporary leaves "<name>.tmp.<host>.<pid>": the
// next write of that file removes it when the pid is dead on this host, and only then.
TEST_F(FileIoTest, AtomicWriteRemovesTemporariesOfDeadWritersOnThisHostOnly) {
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string prefix = dir_ + "/result.json.tmp." + host + ".";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: the pid is dead now
  const std::string dead = prefix + std::to_string(child);
  const std::string alive = prefix + std::to_string(::getppid());
  const std::string other_host = dir_ + "/result.json.tmp.otherhost." + std::to_string(child);
  const std::string other_file = dir_ + "/other.json.tmp." + host + "." + std::to_string(child);
  for (const std::string& leftover : {dead, alive, other_host, other_file}) std::ofstream(leftover) << "partial";

  write_file_atomic(dir_ + "/result.json", "whole");
  EXPECT_EQ(read_text_file(dir_ + "/result.json"), "whole");
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));       // a live writer's file is never touched
  EXPECT_TRUE(std::filesystem::exists(other_host));  // nor another host's (shared filesystems)
  EXPECT_TRUE(std::filesystem::exists(other_file));  // nor another file's
}

TEST_F(FileIoTest, AtomicWriteIntoMissingDirectoryFailsCleanly) {
  EXPECT_THROW(write_file_atomic(dir_ + "/missing/x.json", "x"), FatalError);
}

TEST_F(FileIoTest, AppendKeepsEveryRecord) {
  const std::string path = dir_ + "/cases.jsonl";
  append_line_durable(path, "{\"a\":1}");
  append_line_durable(path, "{\"a\":2}");
  EXPECT_EQ(read_text_file(path), "{\"a\":1}\n{\"a\":2}\n");
}

TEST_F(FileIoTest, MakeDirectoriesRefusesSymlinkedRunDirectory) {
  make_directories(dir_ + "/a/b/c");
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/a/b/c"));
  ASSERT_EQ(::symlink((dir_ + "/a").c_str(), (dir_ + "/run").c_str()), 0);
  EXPECT_THROW(make_directories(dir_ + "/run"), FatalError);
}

TEST_F(FileIoTest, CheckWritableOutputRejectsDirectoriesAndMissingParents) {
  EXPECT_THROW(check_writable_output(dir_, "-J"), UsageError);
  EXPECT_THROW(check_writable_output(dir_ + "/nope/out.json", "-J"), UsageError);
  EXPECT_NO_THROW(check_writable_output(dir_ + "/out.json", "-J"));
}

TEST_F(FileIoTest, ReadMissingFileIsUsageError) {
  EXPECT_THROW(read_text_file(dir_ + "/absent"), UsageError);
}

}  // namespace
}  // namespace cclbench
