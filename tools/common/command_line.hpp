// What the command-line tools (hwprobe, kernel-hub) share: parsing one subcommand's words with
// Boost.Program_options and printing its help. Each tool keeps its own common options.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace backplane::tools {

// Parses a command's words (after its name) into `vm`; `positional` names the option that
// collects the remaining words ("" for none). Abbreviated option names are not guessed.
// Throws boost::program_options::error.
void parse_command_args(const std::vector<std::string>& args,
                        const boost::program_options::options_description& description,
                        const std::string& positional, boost::program_options::variables_map& vm);

// "Usage: <usage>" plus the options, on stdout.
void print_command_help(const std::string& usage,
                        const boost::program_options::options_description& description);

}  // namespace backplane::tools
