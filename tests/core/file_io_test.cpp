#include "bench/core/file_io.hpp"

#include <sys/stat.h>
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
