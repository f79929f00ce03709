// write_file_atomically: replace a file's contents all at once, so that a reader
// (or a crash) sees either the old file or the complete new one, never a torn mix.
// Recipe: write a temporary file in the same directory (rename is atomic only
// within one file system), fsync it, rename it over the target, fsync the
// directory. On any failure the temporary file is removed and the target is left
// exactly as it was.
//
// Threads: any thread; two writers of the same path race only on which complete
// file wins.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gb {

// Stages of an atomic write, for the failure hook used by tests.
enum class AtomicWriteStage { Open, Write, Sync, Rename };

// Test hook: called before each stage; returning false makes that stage fail as
// if the system call had. Empty in production.
using AtomicWriteFailHook = std::function<bool(AtomicWriteStage)>;

// Errors name the path and the failing step ("out.jsonl: cannot create temporary
// file in /dir: Permission denied").
Status write_file_atomically(const std::string& path, std::string_view bytes,
                             const AtomicWriteFailHook& hook = {});

// Reads a whole file; errors name the path.
Result<std::string> read_whole_file(const std::string& path);

}  // namespace gb
