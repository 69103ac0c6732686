// The BACKPLANE_* variables are read with secure_getenv: a setgid (or setuid) program ignores
// them, so a user cannot point a privileged program at their own plugins. Needs root, to make
// a setgid-root copy of print_search_path and run it as another user.
#include <gtest/gtest.h>

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "temp_folder.hpp"

namespace backplane::testing {
namespace {

namespace fs = std::filesystem;

// Runs `program` as uid/gid 65534 (nobody) with BACKPLANE_PLUGIN_PATH set; returns its output.
std::string run_as_nobody(const fs::path& program) {
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(99);
    ::setenv("BACKPLANE_PLUGIN_PATH", "/from-the-user", 1);
    ::execl(program.c_str(), program.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  ::close(out[1]);
  std::string text;
  char buffer[256];
  for (ssize_t got; (got = ::read(out[0], buffer, sizeof buffer)) > 0;) {
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "exit status " + std::to_string(status);
  }
  return text;
}

TEST(PrivilegedEnvironment, ASetgidProgramIgnoresThePluginPath) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a setgid-root program";
  TempFolder folder;
  fs::permissions(folder.path(), fs::perms(0755));
  const fs::path copy = folder.path() / "print_search_path";
  fs::copy_file(PRINT_SEARCH_PATH, copy);
  ::chown(copy.c_str(), 0, 0);

  fs::permissions(copy, fs::perms(0755));
  EXPECT_EQ(run_as_nobody(copy), "/from-the-user\n") << "an ordinary program reads the variable";

  ASSERT_EQ(::chmod(copy.c_str(), 02755), 0);
  const std::string privileged = run_as_nobody(copy);
  EXPECT_EQ(privileged.find("/from-the-user"), std::string::npos) << privileged;
  EXPECT_NE(privileged.find("backplane/plugins"), std::string::npos)
      << "expected the default folder: " << privileged;
}

}  // namespace
}  // namespace backplane::testing
