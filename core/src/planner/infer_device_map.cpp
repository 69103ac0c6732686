// infer_auto_device_map: walk the pending modules front to back; each goes (with the modules it
// shares tied weights with) to the current device if it fits, the main devices keeping room for
// the largest layer still pending; otherwise it is split into its parameters and children, or
// the walk moves on to the next device (accelerators, mps, cpu, then disk without limit).
//
// Same results as the Python loop, in O(n log n): the pending list is a linked list over node
// ids, and Python's "largest pending layer" (get_max_layer_size, rescanned whenever the layers
// that realised the maximum are all gone) is an ordered count of the pending modules' largest
// layers plus a counter of the realising layers not yet taken. See the comments at each step for
// the Python behaviour kept, quirks included.
#include <backplane/error.hpp>

#include <cassert>
#include <map>
#include <tuple>

#include "planner.hpp"

namespace backplane::planner {
namespace {

// The modules still to place, in order: a doubly linked list over node ids, with each pending
// module's largest layer counted in `layers` (what a rescan of get_max_layer_size would see).
class Pending {
 public:
  explicit Pending(const ModelTree& tree)
      : tree_(tree),
        next_(tree.nodes().size(), -1),
        prev_(tree.nodes().size(), -1),
        in_(tree.nodes().size(), false) {}

  bool empty() const { return head_ < 0; }
  bool contains(int id) const { return in_[id]; }

  // Inserts `ids` in order before `pos` (-1: at the end).
  void insert_before(int pos, const int* begin, const int* end) {
    for (const int* it = begin; it != end; ++it) link_before(pos, *it);
  }
  void push_front(int id) { link_before(head_, id); }
  void push_front(const int* begin, const int* end) { insert_before(head_, begin, end); }

  int pop_front() {
    const int id = head_;
    unlink(id);
    return id;
  }
  void remove(int id) { unlink(id); }

  // get_max_layer_size over the pending modules: the largest layer and how many realise it.
  std::pair<uint64_t, int64_t> max_layer() const {
    if (layers_.empty()) return {0, 0};
    return *layers_.rbegin();
  }

 private:
  void link_before(int pos, int id) {
    assert(!in_[id]);
    const int before = pos < 0 ? tail_ : prev_[pos];
    prev_[id] = before;
    next_[id] = pos;
    if (before < 0)
      head_ = id;
    else
      next_[before] = id;
    if (pos < 0)
      tail_ = id;
    else
      prev_[pos] = id;
    in_[id] = true;
    const Node& node = tree_.node(id);
    if (!node.tensor) layers_[node.layer_max] += node.layer_count;
  }

  void unlink(int id) {
    assert(in_[id]);
    const int before = prev_[id];
    const int after = next_[id];
    if (before < 0)
      head_ = after;
    else
      next_[before] = after;
    if (after < 0)
      tail_ = before;
    else
      prev_[after] = before;
    in_[id] = false;
    const Node& node = tree_.node(id);
    if (!node.tensor) {
      auto it = layers_.find(node.layer_max);
      it->second -= node.layer_count;
      if (it->second == 0) layers_.erase(it);
    }
  }

  const ModelTree& tree_;
  std::vector<int> next_;
  std::vector<int> prev_;
  std::vector<bool> in_;
  int head_ = -1;
  int tail_ = -1;
  std::map<uint64_t, int64_t> layers_;
};

// Python keeps `max_layer_names`, the layers of size max_layer_size found by the last
// get_max_layer_size, and drops those under each module it pops; when none is left it rescans
// the pending modules (the popped one is no longer among them). A rescan also follows every
// split. Layers leave the list only when a module at or above them is popped: a tied module
// taken along with another never is, so its layers stay listed (a quirk kept). Counting the
// listed layers is enough: a popped module's listed layers are exactly those of its largest
// layer when that equals max_layer_size (it was pending at the last scan, or already popped in
// this scan and marked), and a popped tensor is listed only by the first scan, which also looks
// at the root's own tensors.
class LargestLayer {
 public:
  LargestLayer(const ModelTree& tree, const std::vector<int>& initial)
      : tree_(tree), taken_(tree.nodes().size(), -1) {
    for (int id : initial) {
      const Node& n = tree.node(id);
      const uint64_t size = n.tensor ? n.size : n.layer_max;
      const int64_t count = n.tensor ? 1 : n.layer_count;
      if (size > size_) {
        size_ = size;
        listed_ = count;
      } else if (size == size_) {
        listed_ += count;
      }
    }
  }

  uint64_t size() const { return size_; }

  // `id` was popped from `pending`.
  void popped(int id, const Pending& pending) {
    if (taken_[id] != scan_) {
      taken_[id] = scan_;
      const Node& n = tree_.node(id);
      if (n.tensor) {
        if (scan_ == 0 && n.size == size_) --listed_;
      } else if (n.layer_max == size_) {
        listed_ -= n.layer_count;
      }
      assert(listed_ >= 0);
    }
    if (listed_ == 0) {
      rescan(pending);
      taken_[id] = scan_;  // not pending during that scan: nothing of it is listed
    }
  }

  void rescan(const Pending& pending) {
    ++scan_;
    std::tie(size_, listed_) = pending.max_layer();
  }

 private:
  const ModelTree& tree_;
  std::vector<int> taken_;  // the scan during which a node's listed layers were dropped
  int scan_ = 0;
  uint64_t size_ = 0;
  int64_t listed_ = 0;
};

bool splittable(const Node& n) {
  return !n.tensor && n.has_child_modules && !n.no_split;
}

// `name + "."` in `other + "."`: Python's test (a substring, not a prefix).
bool dotted_in(const std::string& dotted_name, const std::string& dotted_other) {
  return dotted_other.find(dotted_name) != std::string::npos;
}

}  // namespace

Placement infer_auto_device_map(const ModelTree& tree, const Budgets& budgets) {
  const bool from_pretrained = tree.rules() == PlanRules::kFromPretrained;
  Placement result;
  for (const auto& entry : budgets) result.devices.push_back(entry.first);
  if (budgets.count(MemoryDevice::disk()) == 0) result.devices.push_back(MemoryDevice::disk());
  const std::vector<MemoryDevice>& devices = result.devices;

  // Main devices keep room for the largest layer: mps; else the first accelerator and cpu.
  std::vector<bool> main_device(devices.size(), false);
  int first_gpu = -1;
  int mps = -1;
  for (size_t d = 0; d < devices.size(); ++d) {
    const MemoryDevice::Kind kind = devices[d].kind;
    if (kind == MemoryDevice::Kind::kCpu || kind == MemoryDevice::Kind::kDisk) continue;
    if (first_gpu < 0) first_gpu = static_cast<int>(d);
    if (kind == MemoryDevice::Kind::kMps) mps = static_cast<int>(d);
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    if (mps >= 0) {
      main_device[d] = static_cast<int>(d) == mps;
    } else {
      main_device[d] = static_cast<int>(d) == first_gpu || devices[d] == MemoryDevice::cpu();
    }
  }

  const std::vector<Node>& nodes = tree.nodes();
  const std::vector<int>& split = tree.split_children();
  std::vector<std::string> tied_dotted;  // each tied parameter's name + "."
  for (const auto& group : tree.tied_groups()) {
    for (int id : group) tied_dotted.push_back(nodes[id].name + ".");
  }

  Pending pending(tree);
  const std::vector<int>& initial = tree.initial_entries();
  pending.insert_before(-1, initial.data(), initial.data() + initial.size());
  LargestLayer largest(tree, initial);

  std::vector<uint64_t> used(devices.size(), 0);
  std::vector<int> placed_on(nodes.size(), -1);
  auto place = [&](int id, int device) {
    if (placed_on[id] < 0) result.assigned.emplace_back(id, device);
    placed_on[id] = device;
  };
  size_t current = 0;
  std::vector<int> tied_params;
  std::vector<int> tied_modules;

  while (!pending.empty()) {
    const int id = pending.pop_front();
    largest.popped(id, pending);
    const Node& node = nodes[id];
    const uint64_t size = node.size;

    // Tied parameters outside this module whose group also has one inside it.
    tied_params.clear();
    const std::string dotted = node.name + ".";
    size_t first = 0;
    for (const auto& group : tree.tied_groups()) {
      bool any = false;
      bool all = true;
      for (size_t k = 0; k < group.size(); ++k) {
        const bool inside = dotted_in(dotted, tied_dotted[first + k]);
        any = any || inside;
        all = all && inside;
      }
      if (any && !all) {
        for (size_t k = 0; k < group.size(); ++k) {
          if (!dotted_in(dotted, tied_dotted[first + k])) tied_params.push_back(group[k]);
        }
      }
      first += group.size();
    }

    const MemoryDevice device = devices[current];
    const bool unlimited = device == MemoryDevice::disk();
    double max_size = unlimited ? 0 : budgets.at(device);
    uint64_t reserved = 0;
    if (!unlimited && main_device[current]) {
      max_size -= static_cast<double>(largest.size());
      reserved = largest.size();
    }

    // The pending module that holds each tied parameter. transformers counts each such module
    // once with its whole size; Accelerate adds its size less the tied parameter's, per parameter.
    tied_modules.clear();
    uint64_t with_ties = size;
    for (int p : tied_params) {
      int holder = nodes[p].parent;
      while (holder >= 0 && !pending.contains(holder)) holder = nodes[holder].parent;
      if (holder < 0) {
        // Python fails here too (an IndexError in get_module_size_with_ties).
        throw InvalidArgument("tied parameter " + nodes[p].name +
                              " is in no module left to place " + "when " + node.name +
                              " is placed");
      }
      if (from_pretrained) {
        bool seen = false;
        for (int t : tied_modules) seen = seen || t == holder;
        if (seen) continue;
        with_ties += nodes[holder].size;
      } else {
        with_ties += nodes[holder].size - nodes[p].size;
      }
      tied_modules.push_back(holder);
    }

    auto fits = [&](uint64_t bytes) {
      return static_cast<double>(used[current] + bytes) <= max_size;
    };

    if (unlimited || fits(with_ties)) {
      used[current] += with_ties;
      place(id, static_cast<int>(current));
      for (int t : tied_modules) {
        if (pending.contains(t)) pending.remove(t);
        place(t, static_cast<int>(current));
      }
      continue;
    }

    // The module fits without its tied modules: split the first tied module that can be split,
    // and try again.
    if (!tied_params.empty() && fits(size)) {
      bool split_happened = false;
      for (int t : tied_modules) {
        if (!splittable(nodes[t])) continue;
        pending.insert_before(t, split.data() + nodes[t].split_begin,
                              split.data() + nodes[t].split_end);
        pending.remove(t);
        pending.push_front(id);
        largest.rescan(pending);
        split_happened = true;
        break;
      }
      if (split_happened) continue;
    }

    // Split the module into its parameters and children, or move on to the next device.
    // Accelerate splits only when the module alone does not fit (>=); transformers always tries.
    const bool try_split = from_pretrained || static_cast<double>(used[current] + size) >= max_size;
    if (try_split && splittable(node)) {
      pending.push_front(split.data() + node.split_begin, split.data() + node.split_end);
      largest.rescan(pending);
      continue;
    }
    used[current] += reserved;
    ++current;
    assert(current < devices.size());  // disk takes anything
    pending.push_front(id);
  }
  return result;
}

}  // namespace backplane::planner
