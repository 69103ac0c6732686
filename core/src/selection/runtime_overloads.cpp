// The selection rules over a Runtime's snapshot and the process environment.
#include <backplane/rules/selection.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>

#include "../env.hpp"

namespace backplane {

namespace {

EnvLookup process_environment() {
  return [](const char* name) { return detail::secure_env(name); };
}

// An MPI program has its MPI library loaded before it asks: Open MPI's libmpi.so.40, MPICH's
// (and Intel MPI's, MVAPICH's) libmpi.so.12. RTLD_NOLOAD only looks; it never loads one.
bool mpi_loaded() {
  for (const char* name : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"}) {
    if (void* handle = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
      ::dlclose(handle);
      return true;
    }
  }
  return false;
}

}  // namespace

DeviceMapRequest parse_device_map(std::string_view value, const Runtime& runtime) {
  return parse_device_map(value, runtime.device_types());
}

Selection select_training_device(const Runtime& runtime, const TrainingOptions& options) {
  TrainingOptions resolved = options;
  if (!resolved.mpi_available) resolved.mpi_available = mpi_loaded();
  return select_training_device(runtime.backends(), runtime.devices(), resolved,
                                process_environment());
}

Selection select_inference_device(const Runtime& runtime,
                                  const std::optional<DeviceMapRequest>& device_map) {
  return select_inference_device(runtime.backends(), runtime.devices(), device_map,
                                 process_environment());
}

Selection select_pipeline_device(const Runtime& runtime, const PipelineOptions& options) {
  return select_pipeline_device(runtime.backends(), runtime.devices(), options,
                                process_environment());
}

}  // namespace backplane
