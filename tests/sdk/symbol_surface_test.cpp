// Every in-tree plugin exports one symbol, backplane_plugin_get_api: read from the library file
// with Boost.DLL's library_info (its ELF symbol table), without loading it.
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

// Boost 1.74's library_info uses std::vector and std::string without including them.
#include <string>
#include <vector>

#include <boost/dll/library_info.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

std::vector<std::string> exported_symbols(const std::filesystem::path& library) {
  boost::dll::library_info info(library);
  std::vector<std::string> symbols = info.symbols();
  std::sort(symbols.begin(), symbols.end());
  return symbols;
}

std::vector<std::string> in_tree_plugins() {
  std::vector<std::string> names;
  std::istringstream list(BACKPLANE_IN_TREE_PLUGINS);
  for (std::string name; std::getline(list, name, ',');) names.push_back(name);
  return names;
}

class PluginSymbols : public ::testing::TestWithParam<std::string> {};

TEST_P(PluginSymbols, ExportsOnlyTheEntrySymbol) {
  const std::filesystem::path dir = BACKPLANE_PLUGIN_BUILD_DIR;
  std::ifstream manifest(dir / (GetParam() + ".json"));
  ASSERT_TRUE(manifest) << "no manifest " << GetParam() << ".json in " << dir;
  const nlohmann::json m = nlohmann::json::parse(manifest);
  const std::filesystem::path library = dir / m.at("plugin").at("library_path").get<std::string>();
  const std::vector<std::string> symbols = exported_symbols(library);
  EXPECT_EQ(symbols, std::vector<std::string>{"backplane_plugin_get_api"})
      << library << " (an empty list: the library was stripped of its symbol table)";
}

INSTANTIATE_TEST_SUITE_P(InTree, PluginSymbols, ::testing::ValuesIn(in_tree_plugins()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

// The reader sees more than one symbol where there are more: libbackplane exports its API.
TEST(SymbolReader, SeesEveryExportOfALibrary) {
  const std::vector<std::string> symbols = exported_symbols(BACKPLANE_CORE_LIBRARY);
  EXPECT_GT(symbols.size(), 10u);
  EXPECT_EQ(std::count(symbols.begin(), symbols.end(), "backplane_plugin_get_api"), 0);
}

}  // namespace
