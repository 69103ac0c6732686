// The names of the kernel hub: build variant folder names ("cxx11-cu130-x86_64-linux"),
// backend versions ("12.8"), repo ids ("org/repo"), revisions and BACKPLANE_LOCAL_KERNELS values.
#include "fuzz_input.hpp"

#include <backplane/hub/repo_id.hpp>
#include <backplane/hub/store.hpp>
#include <backplane/hub/variant.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::refusals_allowed([&] { hub::BuildVariant::parse(text); });
  fuzz::refusals_allowed([&] { hub::BackendVersion::parse(text, "fuzz"); });
  fuzz::refusals_allowed([&] {
    const hub::RepoId repo = hub::RepoId::parse(text, "fuzz");
    fuzz::check(hub::RepoId::parse(repo.str(), "again") == repo, "RepoId round trip");
  });
  fuzz::refusals_allowed([&] { hub::check_revision(text, "fuzz"); });
  fuzz::refusals_allowed([&] { hub::LocalKernels::parse(text, "BACKPLANE_LOCAL_KERNELS"); });
  static const hub::SystemFacts system;
  fuzz::refusals_allowed([&] { hub::resolve_variants({std::string(text)}, system); });
  return 0;
}
