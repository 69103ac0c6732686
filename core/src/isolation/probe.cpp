#include "probe.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "../loaded_plugin.hpp"
#include "plugin_host/logger.hpp"

namespace backplane::detail {
namespace {

// What the child writes to the pipe, in order; a refusal is followed by its reason.
constexpr char kInitDoneByte = 'I';
constexpr char kCompletedByte = 'C';
constexpr char kRefusedByte = 'R';

std::string signal_name(int signal) {
  if (const char* abbreviation = ::sigabbrev_np(signal)) return std::string("SIG") + abbreviation;
  return "signal " + std::to_string(signal);
}

// Where the child was when it ended: init (which includes loading the library) or shutdown
// (which includes unloading it).
const char* phase(ProbeStage stage) {
  return stage == ProbeStage::kInitDone ? "shutdown" : "init";
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(timeout.count()) / 1000.0);
  return text;
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    data += written;
    size -= static_cast<size_t>(written);
  }
}

// The child: never returns. _exit skips the parent's atexit handlers and static destructors,
// which belong to the parent.
[[noreturn]] void run_child(int report_fd, const Manifest& manifest, const Registry& committed,
                            const PluginSettings& settings) {
  try {
    const Logger silent(LogLevel::kError, [](LogLevel, const std::string&) {});
    Registry registered;
    std::unique_ptr<LoadedPlugin> plugin =
        LoadedPlugin::load(manifest, silent, committed, registered, settings);
    write_all(report_fd, &kInitDoneByte, 1);
    plugin.reset();  // shutdown, then unload
    write_all(report_fd, &kCompletedByte, 1);
  } catch (const std::exception& e) {
    const std::string message = std::string(1, kRefusedByte) + e.what();
    write_all(report_fd, message.data(), message.size());
  }
  ::_exit(0);
}

ProbeStage stage_of(const std::string& report) {
  if (report.empty()) return ProbeStage::kNothing;
  if (report[0] == kRefusedByte) return ProbeStage::kRefused;
  if (report.find(kCompletedByte) != std::string::npos) return ProbeStage::kCompleted;
  return ProbeStage::kInitDone;
}

}  // namespace

ProbeOutcome describe_probe_end(int wait_status, ProbeStage stage, const std::string& refusal) {
  if (WIFSIGNALED(wait_status)) {
    const std::string signal = signal_name(WTERMSIG(wait_status));
    if (stage == ProbeStage::kCompleted || stage == ProbeStage::kRefused) {
      return {false, "the probe process was killed by " + signal + " after the plugin returned"};
    }
    return {false, std::string(phase(stage)) + " crashed with " + signal};
  }
  const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  if (code == 0 && stage == ProbeStage::kCompleted) return {true, {}};
  if (code == 0 && stage == ProbeStage::kRefused) return {false, refusal};
  if (stage == ProbeStage::kCompleted || stage == ProbeStage::kRefused) {
    return {false, "the probe process ended with status " + std::to_string(code)};
  }
  return {false, std::string(phase(stage)) + " called exit(" + std::to_string(code) + ")"};
}

std::string probe_timeout_reason(ProbeStage stage, std::chrono::milliseconds timeout) {
  return std::string(phase(stage)) + " did not finish within " + seconds_text(timeout) + " s";
}

ProbeOutcome probe_in_child(const Manifest& manifest, const Registry& committed,
                            std::chrono::milliseconds timeout, const PluginSettings& settings) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return {false, std::string("cannot isolate: pipe failed: ") + std::strerror(errno)};
  }
  // Buffered output would otherwise be written twice, once by the child.
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return {false, std::string("cannot isolate: fork failed: ") + std::strerror(error)};
  }
  if (child == 0) {
    ::close(fds[0]);
    run_child(fds[1], manifest, committed, settings);
  }
  ::close(fds[1]);

  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  auto left_ms = [&] {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<long long>(0, std::min<long long>(left, 1 << 30)));
  };
  std::string report;
  bool open = true;
  while (open && left_ms() > 0) {
    pollfd readable{fds[0], POLLIN, 0};
    const int ready = ::poll(&readable, 1, left_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char buffer[512];
    const ssize_t got = ::read(fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) open = false;
    if (got > 0) report.append(buffer, static_cast<size_t>(got));
  }
  ::close(fds[0]);

  // The pipe closes when the child ends (or closes it); wait for the status until the deadline.
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      return {false, std::string("cannot isolate: waitpid failed: ") + std::strerror(errno)};
    }
    if (left_ms() == 0) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      return {false, probe_timeout_reason(stage_of(report), timeout)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string refusal = report.empty() ? std::string() : report.substr(1);
  return describe_probe_end(status, stage_of(report), refusal);
}

}  // namespace backplane::detail
