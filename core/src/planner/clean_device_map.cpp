// clean_device_map: a module whose keys below it (two or more) all share one device becomes one
// key, the highest such module winning; {"": device} when that is the whole model.
//
// Accelerate regroups top-down and re-inserts each regrouped key at the end of the dict, and
// visits children in a Python set's order (string hashing, different in every process), so its
// dict order is not stable from run to run; the keys and devices are. We give definition order.
#include <algorithm>

#include "planner.hpp"

namespace backplane::planner {

std::vector<std::pair<int, int>> clean_device_map(
    const ModelTree& tree, const std::vector<std::pair<int, int>>& assigned) {
  const std::vector<Node>& nodes = tree.nodes();
  const size_t n = nodes.size();
  constexpr int kNone = -1;
  constexpr int kMixed = -2;
  std::vector<int> key(n, kNone);  // the device of an assigned node
  for (const auto& [id, device] : assigned) key[id] = device;

  // Bottom-up: how many keys lie strictly below each node, and their one device (or mixed).
  // Nodes are in pre-order, so each subtree is the range [i, end[i]).
  std::vector<int64_t> below(n, 0);
  std::vector<int> device_below(n, kNone);
  std::vector<size_t> end(n, 0);
  for (size_t i = n; i-- > 0;) {
    end[i] = std::max(end[i], i + 1);
    const int parent = nodes[i].parent;
    if (parent < 0) continue;
    end[parent] = std::max(end[parent], end[i]);
    int64_t count = below[i];
    int device = device_below[i];
    if (key[i] != kNone) {
      ++count;
      device = device == kNone || device == key[i] ? key[i] : kMixed;
    }
    if (count == 0) continue;
    below[parent] += count;
    int& mine = device_below[parent];
    mine = mine == kNone || mine == device ? device : kMixed;
  }

  std::vector<std::pair<int, int>> cleaned;
  for (size_t i = 0; i < n;) {
    if (key[i] != kNone) {
      cleaned.emplace_back(static_cast<int>(i), key[i]);
      i = end[i];
    } else if (below[i] >= 2 && device_below[i] >= 0) {
      cleaned.emplace_back(static_cast<int>(i), device_below[i]);
      i = end[i];
    } else {
      ++i;
    }
  }
  return cleaned;
}

}  // namespace backplane::planner
