// The in-tree kernel packages (kernels/) as the normal build leaves them under
// <build>/hub-packages, loaded straight from their variant folder: the tests that call the
// packages' kernels through the hub's loader, without installing them into a store.
#pragma once

#include <backplane/hub/package.hpp>

#include <string>

namespace backplane::testing {

// backplane/<name> at revision main, variant `variant`, from `packages_dir`.
inline hub::LoadedPackage load_in_tree_package(const std::string& packages_dir,
                                               const std::string& variant,
                                               const std::string& name) {
  hub::PackageSource source;
  source.repo = hub::RepoId::parse("backplane/" + name, "test");
  source.revision = "main";
  source.variant = variant;
  source.folder = packages_dir + "/backplane/" + name + "/build/" + variant;
  return hub::load_package_variant(source);
}

}  // namespace backplane::testing
