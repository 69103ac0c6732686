// Errors of the kernel hub. Bad user input (a repo id, a variable, an archive entry) is
// backplane::InvalidArgument; something missing is backplane::NotFound; these two are for
// packages that are there but cannot be used.
#pragma once

#include <backplane/error.hpp>
#include <backplane/export.hpp>

namespace backplane::hub {

// A package that cannot be loaded or installed as it is: invalid metadata, a library that
// fails to open or to register, an untrusted publisher. The message names the package (and the
// file or field) and the reason.
class BACKPLANE_API PackageError : public Error {
 public:
  using Error::Error;
};

// A package whose files differ from what kernels.lock records. The message names the lock file,
// the package, the variant and the first file that differs.
class BACKPLANE_API IntegrityError : public PackageError {
 public:
  using PackageError::PackageError;
};

}  // namespace backplane::hub
