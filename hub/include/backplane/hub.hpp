// The local kernel hub (libbackplane-hub): kernel packages, build variants, the store, lock
// files, trust, archives, and loading a package's kernels. hub/README.md documents the formats.
#pragma once

#include <backplane/hub/archive.hpp>
#include <backplane/hub/attention.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/kernel_builder.hpp>
#include <backplane/hub/lock.hpp>
#include <backplane/hub/metadata.hpp>
#include <backplane/hub/package.hpp>
#include <backplane/hub/repo_id.hpp>
#include <backplane/hub/store.hpp>
#include <backplane/hub/trust.hpp>
#include <backplane/hub/use_kernels.hpp>
#include <backplane/hub/variant.hpp>
