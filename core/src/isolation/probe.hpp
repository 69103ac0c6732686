// Crash isolation (RuntimeOptions::isolate): a plugin is first loaded, initialized and shut down
// in a forked child, so that one that crashes, hangs or exits takes only the child with it.
// Owned by the core; not part of the public API.
#pragma once

#include <chrono>
#include <string>

#include "../manifest.hpp"
#include "../registry.hpp"
#include "plugin_host/host_api.hpp"

namespace backplane::detail {

// How the child's probe ended, and the parent's words for it.
struct ProbeOutcome {
  bool passed = false;
  std::string reason;  // when !passed: "init crashed with SIGSEGV", "init called exit(3)", ...
};

// How a child's end reads, from its wait status and how far it got: table-tested.
enum class ProbeStage {
  kNothing,    // the child reported nothing: it ended in load or init
  kInitDone,   // init returned; shutdown or unloading did not finish
  kRefused,    // the loader refused the plugin; the child sent why
  kCompleted,  // load, init and shutdown all returned
};
ProbeOutcome describe_probe_end(int wait_status, ProbeStage stage, const std::string& refusal);

// "init did not finish within 10 s" for a child killed at the timeout.
std::string probe_timeout_reason(ProbeStage stage, std::chrono::milliseconds timeout);

// Forks; the child loads `manifest` against `committed` (what earlier plugins registered), runs
// init and shutdown, unloads it and reports through a pipe. The parent waits up to `timeout`,
// then kills the child. Never throws for what the plugin does.
ProbeOutcome probe_in_child(const Manifest& manifest, const Registry& committed,
                            std::chrono::milliseconds timeout, const PluginSettings& settings = {});

}  // namespace backplane::detail
