#pragma once
// Result files are written atomically: a reader (or a resumed run) sees either the old file or the
// whole new one, never half. Writes never follow a symbolic link at the final path component, and
// files are created 0644.
#include <string>
#include <string_view>

namespace cclbench {

// Writes `content` to a temporary file beside `path`, fsyncs it, renames it over `path` and fsyncs
// the directory. Refuses to replace a symbolic link. Throws FatalError(runtime_error) with the path
// and the system's reason (read-only filesystem, no space, permission) and leaves no temporary file.
void write_file_atomic(const std::string& path, std::string_view content);

// Appends one line (a newline is added) with a single write() on an O_APPEND descriptor and fsyncs,
// so concurrent appenders never interleave inside a record and a crash loses at most this record.
void append_line_durable(const std::string& path, std::string_view line);

// Creates `path` (and missing parents) as directories with mode 0755. Refuses a path whose existing
// final component is a symbolic link or not a directory. Throws FatalError.
void make_directories(const std::string& path);

// Checks, before anything is measured, that `path` can be created or replaced: its directory exists
// (or can be created) and is writable. Throws UsageError naming `what` (e.g. "-J").
void check_writable_output(const std::string& path, std::string_view what);

// Reads a whole regular file. Throws UsageError naming the path when it is missing or unreadable.
std::string read_text_file(const std::string& path);

}  // namespace cclbench
