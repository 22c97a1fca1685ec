// Env::Default (POSIX) and the test FaultInjectionEnv: files, renames, listings, locks, mappings,
// and power loss that forgets exactly what was not synced.
#include "fak/core/env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::EnvOp;
using testing::FaultInjectionEnv;
using testing::FaultKind;
using testing::ScopedTempDir;

Status WriteSynced(Env* env, const std::string& path, std::string_view data) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, env->NewWritableFile(path));
  FAK_RETURN_IF_ERROR(f->Append(data));
  FAK_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

TEST(PosixEnv, AppendSyncAndReadBack) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  const std::string path = tmp.Sub("log");
  {
    ASSERT_OK_AND_ASSIGN(auto f, env->NewAppendableFile(path));
    ASSERT_OK(f->Append("hello "));
    ASSERT_OK(f->Sync());
    ASSERT_OK(f->Close());
  }
  {
    ASSERT_OK_AND_ASSIGN(auto f, env->NewAppendableFile(path));  // appends after what is there
    ASSERT_OK(f->Append("world"));
    ASSERT_OK(f->Sync());
  }
  EXPECT_EQ(*env->ReadFile(path), "hello world");
  EXPECT_EQ(*env->ReadFilePrefix(path, 5), "hello");
  EXPECT_EQ(*env->ReadFilePrefix(path, 100), "hello world");
  ASSERT_OK(env->TruncateFile(path, 4));
  EXPECT_EQ(*env->ReadFile(path), "hell");
  ASSERT_OK(WriteSynced(env, path, "new"));  // NewWritableFile truncates
  EXPECT_EQ(*env->ReadFile(path), "new");
  ASSERT_OK_AND_ASSIGN(FileInfo info, env->GetFileInfo(path));
  EXPECT_TRUE(info.is_regular);
  EXPECT_EQ(info.size_bytes, 3u);
  EXPECT_EQ(info.name, "log");
}

TEST(PosixEnv, MissingFilesAreNotFoundAndErrorsNameThePath) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  const std::string absent = tmp.Sub("absent");
  for (Status s : {env->ReadFile(absent).status(), env->RemoveFile(absent), env->GetFileInfo(absent).status(),
                   env->ListDir(absent).status(), env->MapReadOnly(absent).status(), env->TruncateFile(absent, 0)}) {
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find(absent), std::string_view::npos) << s.ToString();
  }
  Status s = env->RenameFile(absent, tmp.Sub("b"));
  EXPECT_NE(s.message().find("rename"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("errno"), std::string_view::npos) << s.ToString();
}

TEST(PosixEnv, RenameRemoveAndDirectories) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  const std::string dir = tmp.Sub("d");
  ASSERT_OK(env->CreateDir(dir));
  ASSERT_OK(env->CreateDir(dir));  // already there: fine
  ASSERT_OK(WriteSynced(env, dir + "/a", "A"));
  ASSERT_OK(WriteSynced(env, dir + "/b", "B"));
  ASSERT_OK(env->RenameFile(dir + "/a", dir + "/b"));  // replaces b
  ASSERT_OK(env->SyncDir(dir));
  EXPECT_EQ(*env->ReadFile(dir + "/b"), "A");
  ASSERT_OK(env->CreateDir(dir + "/sub"));
  ASSERT_OK_AND_ASSIGN(std::vector<FileInfo> entries, env->ListDir(dir));
  std::sort(entries.begin(), entries.end(), [](const FileInfo& x, const FileInfo& y) { return x.name < y.name; });
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "b");
  EXPECT_TRUE(entries[0].is_regular);
  EXPECT_EQ(entries[0].size_bytes, 1u);
  EXPECT_EQ(entries[1].name, "sub");
  EXPECT_TRUE(entries[1].is_dir);
  EXPECT_EQ(env->CreateDir(dir + "/b").code(), StatusCode::kFailedPrecondition);  // a file is there
  EXPECT_FALSE(env->RemoveDir(dir).ok());  // not empty
  ASSERT_OK(env->RemoveDir(dir + "/sub"));
  ASSERT_OK(env->RemoveFile(dir + "/b"));
  ASSERT_OK(env->RemoveDir(dir));
  EXPECT_EQ(env->ListDir(dir).status().code(), StatusCode::kNotFound);
}

TEST(PosixEnv, RefusesToFollowSymlinks) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  ASSERT_OK(WriteSynced(env, tmp.Sub("real"), "secret"));
  ASSERT_EQ(::symlink(tmp.Sub("real").c_str(), tmp.Sub("link").c_str()), 0);
  Result<std::string> read = env->ReadFile(tmp.Sub("link"));
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().code(), StatusCode::kCorruption);
  EXPECT_NE(read.error().message().find("symbolic link"), std::string_view::npos) << read.error().ToString();
  EXPECT_FALSE(env->ReadFilePrefix(tmp.Sub("link"), 1).has_value());
  EXPECT_FALSE(env->NewWritableFile(tmp.Sub("link")).has_value());
  EXPECT_FALSE(env->NewAppendableFile(tmp.Sub("link")).has_value());
  ASSERT_OK_AND_ASSIGN(FileInfo info, env->GetFileInfo(tmp.Sub("link")));
  EXPECT_FALSE(info.is_regular);
  EXPECT_FALSE(info.is_dir);
  EXPECT_EQ(*env->ReadFile(tmp.Sub("real")), "secret");  // untouched
  EXPECT_EQ(env->ReadFile(tmp.path()).status().code(), StatusCode::kCorruption);  // a directory
}

TEST(PosixEnv, PrivateFilesAreOwnerOnlyAndNeverOverwritten) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  const std::string path = tmp.Sub("key");
  {
    ASSERT_OK_AND_ASSIGN(auto f, env->NewPrivateFile(path));
    ASSERT_OK(f->Append("k"));
    ASSERT_OK(f->Close());
  }
  ASSERT_OK_AND_ASSIGN(FileInfo info, env->GetFileInfo(path));
  EXPECT_EQ(info.mode, 0600u);
  EXPECT_EQ(env->NewPrivateFile(path).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*env->ReadFile(path), "k");
}

TEST(PosixEnv, LockConflictsInProcessAndIsReleased) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  const std::string path = tmp.Sub("LOCK");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileLock> lock, env->LockFile(path));
    Result<std::unique_ptr<FileLock>> again = env->LockFile(path);
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(again.error().message().find(path), std::string_view::npos) << again.error().ToString();
    // Another spelling of the same file is the same lock.
    EXPECT_FALSE(env->LockFile(tmp.path() + "//LOCK").has_value());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileLock> lock, env->LockFile(path));  // released with the object
  EXPECT_TRUE(env->GetFileInfo(path).has_value());  // the lock file stays
}

TEST(PosixEnv, MapsEmptyAndNonEmptyFiles) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  ASSERT_OK(WriteSynced(env, tmp.Sub("empty"), ""));
  ASSERT_OK(WriteSynced(env, tmp.Sub("full"), "mapped bytes"));
  ASSERT_OK_AND_ASSIGN(auto empty, env->MapReadOnly(tmp.Sub("empty")));
  EXPECT_TRUE(empty->bytes().empty());
  ASSERT_OK_AND_ASSIGN(auto full, env->MapReadOnly(tmp.Sub("full")));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(full->bytes().data()), full->bytes().size()), "mapped bytes");
  EXPECT_FALSE(env->MapReadOnly(tmp.path()).has_value());  // a directory
}

// Range reads: exact ranges anywhere in the file, a range past the end refused, a file that shrank
// after it was opened reported (never a short fill), links and directories refused like ReadFile.
TEST(PosixEnv, ReadsRangesOfAFileWhoseSizeIsFixedAtOpen) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  ASSERT_OK(WriteSynced(env, tmp.Sub("f"), "0123456789"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f, env->NewRandomAccessFile(tmp.Sub("f")));
  EXPECT_EQ(f->size(), 10u);
  std::string out(4, '\0');
  ASSERT_OK(f->ReadAt(3, std::as_writable_bytes(std::span(out))));
  EXPECT_EQ(out, "3456");
  ASSERT_OK(f->ReadAt(6, std::as_writable_bytes(std::span(out))));
  EXPECT_EQ(out, "6789");
  EXPECT_EQ(f->ReadAt(7, std::as_writable_bytes(std::span(out))).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->ReadAt(UINT64_MAX, std::as_writable_bytes(std::span(out))).code(), StatusCode::kInvalidArgument);
  ASSERT_OK(env->TruncateFile(tmp.Sub("f"), 5));
  const Status shrunk = f->ReadAt(3, std::as_writable_bytes(std::span(out)));
  EXPECT_EQ(shrunk.code(), StatusCode::kCorruption) << shrunk.ToString();
  EXPECT_NE(shrunk.message().find("ended at 5 bytes"), std::string::npos) << shrunk.ToString();

  ASSERT_EQ(::symlink(tmp.Sub("f").c_str(), tmp.Sub("link").c_str()), 0);
  EXPECT_EQ(env->NewRandomAccessFile(tmp.Sub("link")).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(env->NewRandomAccessFile(tmp.path()).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(env->NewRandomAccessFile(tmp.Sub("absent")).status().code(), StatusCode::kNotFound);

  const std::unique_ptr<RandomAccessFile> mem = RandomAccessBytes("abc");  // the in-memory one: same contract
  std::string two(2, '\0');
  ASSERT_OK(mem->ReadAt(1, std::as_writable_bytes(std::span(two))));
  EXPECT_EQ(two, "bc");
  EXPECT_EQ(mem->ReadAt(2, std::as_writable_bytes(std::span(two))).code(), StatusCode::kInvalidArgument);
}

TEST(PosixEnv, ClocksMove) {
  Env* env = Env::Default();
  EXPECT_GT(env->NowUnixMicros(), int64_t{1'600'000'000} * 1'000'000);
  const int64_t a = env->NowMonotonicNanos();
  EXPECT_GE(env->NowMonotonicNanos(), a);
}

TEST(PosixEnv, WriteFileAtomicallyReplacesWholeFiles) {
  ScopedTempDir tmp;
  Env* env = Env::Default();
  const std::string parts_a[] = {"one ", "two"};
  std::vector<std::string_view> parts(std::begin(parts_a), std::end(parts_a));
  ASSERT_OK(WriteFileAtomically(env, tmp.Sub("f.tmp"), tmp.Sub("f"), tmp.path(), parts));
  EXPECT_EQ(*env->ReadFile(tmp.Sub("f")), "one two");
  EXPECT_EQ(env->GetFileInfo(tmp.Sub("f.tmp")).status().code(), StatusCode::kNotFound);
  // A failed rename (target is a non-empty directory) keeps the old state and removes the temporary.
  ASSERT_OK(env->CreateDir(tmp.Sub("d")));
  ASSERT_OK(WriteSynced(env, tmp.Sub("d/x"), "x"));
  EXPECT_FALSE(WriteFileAtomically(env, tmp.Sub("g.tmp"), tmp.Sub("d"), tmp.path(), parts).ok());
  EXPECT_EQ(env->GetFileInfo(tmp.Sub("g.tmp")).status().code(), StatusCode::kNotFound);
}

// ---- FaultInjectionEnv ----

TEST(FaultInjectionEnv, PowerLossDropsUnsyncedBytesAndUnsyncedEntries) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  ASSERT_OK(WriteSynced(&env, tmp.Sub("old"), "durable"));
  ASSERT_OK(env.SyncDir(tmp.path()));
  {
    ASSERT_OK_AND_ASSIGN(auto f, env.NewAppendableFile(tmp.Sub("old")));
    ASSERT_OK(f->Append("+synced"));
    ASSERT_OK(f->Sync());
    ASSERT_OK(f->Append("+lost"));
  }
  ASSERT_OK(WriteSynced(&env, tmp.Sub("new"), "never dir-synced"));
  ASSERT_OK(env.PowerLoss());
  EXPECT_EQ(*env.ReadFile(tmp.Sub("old")), "durable+synced");
  EXPECT_EQ(env.ReadFile(tmp.Sub("new")).status().code(), StatusCode::kNotFound);
}

TEST(FaultInjectionEnv, PowerLossCanKeepATornPrefix) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  ASSERT_OK(WriteSynced(&env, tmp.Sub("f"), "abc"));
  ASSERT_OK(env.SyncDir(tmp.path()));
  {
    ASSERT_OK_AND_ASSIGN(auto f, env.NewAppendableFile(tmp.Sub("f")));
    ASSERT_OK(f->Append("defgh"));
  }
  ASSERT_OK(env.PowerLoss(/*keep_unsynced_bytes=*/2));
  EXPECT_EQ(*env.ReadFile(tmp.Sub("f")), "abcde");
}

TEST(FaultInjectionEnv, UnsyncedRenameRevertsAndSyncedRenameStays) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  ASSERT_OK(WriteSynced(&env, tmp.Sub("target"), "v1"));
  ASSERT_OK(env.SyncDir(tmp.path()));
  ASSERT_OK(WriteSynced(&env, tmp.Sub("t.tmp"), "v2"));
  ASSERT_OK(env.RenameFile(tmp.Sub("t.tmp"), tmp.Sub("target")));
  ASSERT_OK(env.PowerLoss());
  EXPECT_EQ(*env.ReadFile(tmp.Sub("target")), "v1");
  EXPECT_EQ(env.ReadFile(tmp.Sub("t.tmp")).status().code(), StatusCode::kNotFound);  // its creation was unsynced too

  ASSERT_OK(WriteFileAtomically(&env, tmp.Sub("t.tmp"), tmp.Sub("target"), tmp.path(),
                                std::vector<std::string_view>{"v3"}));
  ASSERT_OK(env.PowerLoss());
  EXPECT_EQ(*env.ReadFile(tmp.Sub("target")), "v3");
}

TEST(FaultInjectionEnv, UnsyncedRemovalAndMkdirAreUndone) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  ASSERT_OK(WriteSynced(&env, tmp.Sub("keep"), "k"));
  ASSERT_OK(env.SyncDir(tmp.path()));
  ASSERT_OK(env.RemoveFile(tmp.Sub("keep")));
  ASSERT_OK(env.CreateDir(tmp.Sub("d")));
  ASSERT_OK(WriteSynced(&env, tmp.Sub("d/x"), "x"));
  ASSERT_OK(env.SyncDir(tmp.Sub("d")));  // x is durable in d, but d itself is not
  ASSERT_OK(env.PowerLoss());
  EXPECT_EQ(*env.ReadFile(tmp.Sub("keep")), "k");
  EXPECT_EQ(env.ListDir(tmp.Sub("d")).status().code(), StatusCode::kNotFound);
}

TEST(FaultInjectionEnv, FailsTheNthCallAndCounts) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  ASSERT_OK_AND_ASSIGN(auto f, env.NewAppendableFile(tmp.Sub("f")));
  env.FailNth(EnvOp::kSync, 2, FaultKind::kIOError);
  env.FailNth(EnvOp::kAppend, 3, FaultKind::kShortWrite);
  ASSERT_OK(f->Append("ab"));
  ASSERT_OK(f->Sync());
  ASSERT_OK(f->Append("cd"));
  Status sync = f->Sync();
  EXPECT_EQ(sync.code(), StatusCode::kIOError);
  EXPECT_NE(sync.message().find("Input/output error"), std::string_view::npos) << sync.ToString();
  Status append = f->Append("efgh");
  EXPECT_NE(append.message().find("No space left"), std::string_view::npos) << append.ToString();
  EXPECT_EQ(*env.ReadFile(tmp.Sub("f")), "abcdef");  // half of "efgh" landed
  EXPECT_EQ(env.count(EnvOp::kAppend), 3u);
  EXPECT_EQ(env.count(EnvOp::kSync), 2u);
  EXPECT_EQ(env.count(EnvOp::kCreate), 1u);
  ASSERT_OK(f->Append("i"));  // faults fire once
}

TEST(FaultInjectionEnv, CrashStopsEveryLaterMutationUntilPowerLoss) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  env.FailNth(EnvOp::kRename, 1, FaultKind::kCrash);
  ASSERT_OK(WriteSynced(&env, tmp.Sub("a"), "a"));
  EXPECT_FALSE(env.RenameFile(tmp.Sub("a"), tmp.Sub("b")).ok());
  EXPECT_TRUE(env.crashed());
  EXPECT_FALSE(env.SyncDir(tmp.path()).ok());
  EXPECT_FALSE(env.NewWritableFile(tmp.Sub("c")).ok());
  ASSERT_OK(env.PowerLoss());
  EXPECT_FALSE(env.crashed());
  EXPECT_EQ(env.ReadFile(tmp.Sub("a")).status().code(), StatusCode::kNotFound);  // never dir-synced
  ASSERT_OK(env.SyncDir(tmp.path()));
}

TEST(FaultInjectionEnv, ManualClock) {
  FaultInjectionEnv env;
  env.UseManualClock(1000, 10);
  EXPECT_EQ(env.NowUnixMicros(), 1010);
  EXPECT_EQ(env.NowUnixMicros(), 1020);
}

}  // namespace
}  // namespace fak
