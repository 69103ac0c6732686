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

bool parse_command_or_help(const std::vector<std::string>& args,
                           const po::options_description& description,
                           const std::string& positional, const std::string& usage,
                           po::variables_map& vm) {
  po::options_description all;
  all.add(description);
  if (!positional.empty()) {
    all.add_options()(positional.c_str(), po::value<std::vector<std::string>>());
  }
  parse_command_args(args, all, positional, vm);
  if (vm["help"].as<bool>()) {
    print_command_help(usage, description);
    return false;
  }
  return true;
}

std::vector<std::string> positional_words(const po::variables_map& vm,
                                          const std::string& positional) {
  return vm.count(positional) ? vm[positional].as<std::vector<std::string>>()
                              : std::vector<std::string>{};
}

}  // namespace backplane::tools
