// What the command-line tools (hwprobe, kernel-hub) share: exit codes, the command table entry,
// parsing one subcommand's words with Boost.Program_options and printing its help. Each tool
// keeps its own common options and its own list of commands.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace backplane::tools {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // anything but bad input
constexpr int kExitUsage = 2;    // bad usage or bad input; the message is on stderr

// One subcommand: its name, its line in the tool's --help, and what runs it with the words
// after its name.
struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

// Parses a command's words (after its name) into `vm`; `positional` names the option that
// collects the remaining words ("" for none). Abbreviated option names are not guessed.
// Throws boost::program_options::error.
void parse_command_args(const std::vector<std::string>& args,
                        const boost::program_options::options_description& description,
                        const std::string& positional, boost::program_options::variables_map& vm);

// "Usage: <usage>" plus the options, on stdout.
void print_command_help(const std::string& usage,
                        const boost::program_options::options_description& description);

// The preamble of every command: parses its words into `vm` as parse_command_args does, with
// `positional` (when not "") a hidden option added here that collects the remaining words
// (read them with positional_words). `description` must hold the tool's "help,h" switch: when
// it was given, prints print_command_help(usage, description) and returns false, and the
// command has nothing more to do.
bool parse_command_or_help(const std::vector<std::string>& args,
                           const boost::program_options::options_description& description,
                           const std::string& positional, const std::string& usage,
                           boost::program_options::variables_map& vm);

// The words parse_command_or_help collected under `positional`; none when there were none.
std::vector<std::string> positional_words(const boost::program_options::variables_map& vm,
                                          const std::string& positional);

}  // namespace backplane::tools
