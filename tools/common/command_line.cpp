#include "command_line.hpp"

#include <iostream>

namespace po = boost::program_options;

namespace backplane::tools {

void parse_command_args(const std::vector<std::string>& args,
                        const po::options_description& description, const std::string& positional,
                        po::variables_map& vm) {
  po::positional_options_description words;
  if (!positional.empty()) words.add(positional.c_str(), -1);
  po::store(
      po::command_line_parser(args)
          .options(description)
          .positional(words)
          .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
          .run(),
      vm);
  po::notify(vm);
}

void print_command_help(const std::string& usage, const po::options_description& description) {
  std::cout << "Usage: " << usage << "\n\n" << description << "\n";
}

}  // namespace backplane::tools
