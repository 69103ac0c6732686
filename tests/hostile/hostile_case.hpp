// One hostile input and the part of the error it must get; shared by the hostile-input tables.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <ostream>
#include <string>

namespace backplane::hostile {

struct HostileCase {
  const char* name;
  // Makes the input (a file in a folder) and hands it to the parser; must throw.
  std::function<void()> run;
  std::string error;  // a part of the message the refusal must contain
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const HostileCase& c, std::ostream* os) {
  *os << c.name;
}

inline void expect_refused(const HostileCase& c) {
  SCOPED_TRACE(c.name);
  try {
    c.run();
    ADD_FAILURE() << c.name << ": accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos)
        << c.name << ": the error is\n  " << e.what() << "\nexpected it to contain\n  " << c.error;
  }
}

// gtest prints each case by its name.
inline std::string case_name(const ::testing::TestParamInfo<HostileCase>& info) {
  std::string out;
  for (const char ch : std::string(info.param.name)) {
    out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return out;
}

}  // namespace backplane::hostile
