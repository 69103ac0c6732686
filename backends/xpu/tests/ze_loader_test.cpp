// Opening the Level Zero loader: the reasons given when it is missing or is not a loader.
#include <gtest/gtest.h>

#include "ze_loader.hpp"

namespace backplane::xpu {
namespace {

TEST(ZeLoaderOpen, MissingLibraryNamesItAndItsDlerror) {
  std::string error;
  EXPECT_EQ(ZeLoader::open("libbackplane-absent-ze.so.1", error), nullptr);
  EXPECT_EQ(error,
            "the Level Zero loader libbackplane-absent-ze.so.1 was not found "
            "(libbackplane-absent-ze.so.1: cannot open shared object file: No such file or "
            "directory)");
}

TEST(ZeLoaderOpen, ALibraryThatIsNotALoader) {
  std::string error;
  EXPECT_EQ(ZeLoader::open("libc.so.6", error), nullptr);
  EXPECT_EQ(error,
            "the Level Zero loader libc.so.6 lacks zeInit (too old or not a Level Zero loader)");
}

}  // namespace
}  // namespace backplane::xpu
