// Ranks from the launchers' variables, in Accelerate's order (accelerate utils/environment.py
// get_cpu_distributed_information, get_int_from_env; state.py _prepare_backend for LOCAL_RANK).
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <cctype>
#include <limits>
#include <string>

#include "common.hpp"

namespace backplane {

namespace {

using selection_detail::single_quoted;

struct Found {
  std::optional<int> value;
  std::string variable;
};

// get_int_from_env: the first variable that is set and not negative; int() stops at the first
// malformed one.
Found first_int(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const std::optional<std::string> text = env(name);
    if (!text) continue;
    const std::optional<long long> value = selection_detail::python_int(*text);
    if (!value) {
      throw InvalidArgument("Environment variable " + std::string(name) + "=" +
                            single_quoted(*text) +
                            " is not an integer (Python's int() would fail: invalid literal for "
                            "int() with base 10: " +
                            single_quoted(*text) + ")");
    }
    if (*value < 0) continue;
    if (*value > std::numeric_limits<int>::max()) {
      throw InvalidArgument("Environment variable " + std::string(name) + "=" +
                            single_quoted(*text) + " is too large for a rank or a process count");
    }
    return {static_cast<int>(*value), name};
  }
  return {};
}

bool is_mpi_variable(const std::string& name) {
  return name.rfind("PMI_", 0) == 0 || name.rfind("OMPI_", 0) == 0 || name.rfind("MV2_", 0) == 0 ||
         name.rfind("MPI_", 0) == 0;
}

std::string family(const std::string& name) {
  if (name.empty()) return "";
  if (is_mpi_variable(name)) return "mpi";
  if (name.rfind("SLURM_", 0) == 0) return "slurm";
  return "torchrun";
}

}  // namespace

Launch detect_launch(const EnvLookup& env) {
  const Found rank = first_int(
      env, {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"});
  const Found world = first_int(env, {"WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                      "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS"});
  const Found local = first_int(env, {"LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});

  Launch launch;
  launch.rank = rank.value.value_or(0);
  launch.world_size = world.value.value_or(1);
  launch.local_rank = local.value.value_or(0);
  for (const Found* found : {&local, &rank, &world}) {
    if (!found->value) continue;
    launch.sources.push_back(found->variable + "=" + std::to_string(*found->value));
    if (is_mpi_variable(found->variable)) launch.mpi = true;
  }
  // Accelerate: int(os.environ.get("LOCAL_RANK", -1)) != -1 marks a torchrun launch.
  const bool torchrun = local.variable == "LOCAL_RANK";
  if (torchrun) {
    launch.launcher = "torchrun";
  } else if (launch.world_size > 1) {
    launch.launcher = family(world.variable);
  }
  if (!launch.launched()) return launch;

  if (launch.world_size < 1) {
    throw InvalidArgument("Environment variable " + world.variable +
                          "=0: a launched run has at "
                          "least one process");
  }
  auto name_of = [](const Found& found, const char* fallback) {
    return found.value ? found.variable + "=" + std::to_string(*found.value)
                       : std::string(fallback);
  };
  if (launch.rank >= launch.world_size) {
    throw InvalidArgument(name_of(rank, "rank 0") + " is not below " +
                          name_of(world, "a world size of 1") +
                          ": ranks count from 0 to the number of processes - 1");
  }
  if (launch.local_rank >= launch.world_size) {
    throw InvalidArgument(name_of(local, "local rank 0") + " is not below " +
                          name_of(world, "a world size of 1") +
                          ": a local rank counts the processes on one machine");
  }
  return launch;
}

}  // namespace backplane
